-- queue_pop: take up to max_pods pods off the head of activeQ and lease them to the caller.
-- Each popped pod moves to inflight with a lease deadline, gets attempts+1, the next
-- scheduling cycle and the next lease epoch (its fencing token), and deliveries+1. A pod
-- already delivered max_deliveries times without an orderly outcome (done or a failure
-- add) is dead-lettered instead and not returned: it crashed that many workers.
--
-- KEYS[1]  zset    activeQ     member "<ts:013d>|ns/name", score -priority
-- KEYS[2]  zset    inflight    member ns/name, score lease deadline (ms)
-- KEYS[3]  zset    dead        member ns/name, score time dead-lettered (ms)
-- KEYS[4]  hash    info        ns/name -> queue record (lib/queue_record.lua)
-- KEYS[5]  string  cycle       scheduling cycle counter (+1 per popped pod)
-- KEYS[6]  string  epoch       lease epoch counter (+1 per popped pod)
-- KEYS[7]  list    wake        wake-up tokens; dropped once activeQ is empty
-- KEYS[8]  hash    gang:of     ns/name -> pod group (lib/gang.lua)
-- KEYS[9]  hash    gang:members pod group -> comma-joined member keys
-- KEYS[10] zset    backoffQ    member ns/name
-- KEYS[11] zset    unschedulable member ns/name
-- ARGV[1]  int     max_pods        1 .. 1000
-- ARGV[2]  int     now_ms
-- ARGV[3]  int     lease_ms        lease length
-- ARGV[4]  int     max_deliveries
-- ARGV[5]  0|1     pop_from_backoff  (kube 1.33+'s SchedulerPopFromBackoffQ; 0 when absent)
-- With pop_from_backoff and activeQ emptied short of max_pods, the rest comes from backoffQ:
-- pods a plugin rejected (pl not empty; a pod backing off after an error stays), earliest
-- second of backoff expiry first and, within one second, in activeQ's order (priority,
-- then queue timestamp, then key), as kube's podBackoffQ orders its windows. At most
-- BACKOFF_LOOK backoffQ members are looked at per call.
-- A gang is popped whole: with a member of a pod group come its siblings waiting in
-- activeQ, backoffQ or the unschedulable set (after the head, beyond max_pods if need
-- be), so that no two workers ever hold parts of one gang. Members gated, in flight,
-- assumed or bound stay where they are.
-- Returns: flat array {from_backoff, key1, record1, key2, record2, ...} in pop order,
-- from_backoff the number of those taken from backoffQ; an error, with nothing written,
-- when a key holds another type or a counter is not a number.

--!include queue_record
--!include precheck
--!include bulk
--!include gang

local find, sub = string.find, string.sub
local max_pods = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local lease_ms = tonumber(ARGV[3])
local max_deliveries = tonumber(ARGV[4])
local from_backoff = ARGV[5] == '1'
local BACKOFF_LOOK = 1000
local WINDOW_MS = 1000
if not max_pods or max_pods < 1 or max_pods > 1000 or not now or not lease_ms
    or not max_deliveries then
  return redis.error_reply('queue_pop: max_pods (1..1000), now_ms, lease_ms, max_deliveries must be numbers')
end
local bad = wrong_types('queue_pop', {{KEYS[1], 'zset'}, {KEYS[2], 'zset'}, {KEYS[3], 'zset'},
                                      {KEYS[4], 'hash'}, {KEYS[8], 'hash'}, {KEYS[9], 'hash'},
                                      {KEYS[10], 'zset'}, {KEYS[11], 'zset'}})
if bad then return redis.error_reply(bad) end
local cycle, epoch, err
cycle, err = read_counter('queue_pop', KEYS[5])
if err then return redis.error_reply(err) end
epoch, err = read_counter('queue_pop', KEYS[6])
if err then return redis.error_reply(err) end

-- Read first (the head of activeQ, window by window, and the records), write after: a
-- pop that fails leaves every pod where it was. Every pod popped here gets the same
-- lease deadline (formatted once; the lists grow by counters, not by #).
-- out[1] is set to the number popped from backoffQ last; the pairs follow it.
local out, fields, leases, dead = {0}, {}, {}, {}
local n_out, n_fields, n_leases = 1, 0, 0
local lease_until = string.format('%d', now + lease_ms)
local taken, examined = 0, 0

-- Lease one pod taken off its sub-queue (or dead-letter it); true when it was leased.
local function lease(key, record)
  local text, dead_lettered = rec_pop(record, cycle + 1, epoch + 1, max_deliveries)
  if not text then return false end
  fields[n_fields + 1], fields[n_fields + 2] = key, text
  n_fields = n_fields + 2
  if dead_lettered then
    dead[#dead + 1] = now
    dead[#dead + 1] = key
    return false
  end
  cycle = cycle + 1
  epoch = epoch + 1
  leases[n_leases + 1], leases[n_leases + 2] = lease_until, key
  n_leases = n_leases + 2
  taken = taken + 1
  out[n_out + 1], out[n_out + 2] = key, text
  n_out = n_out + 2
  return true
end
while taken < max_pods do
  local head = redis.call('ZRANGE', KEYS[1], examined, examined + max_pods - taken - 1)
  if #head == 0 then break end
  examined = examined + #head
  local keys, n_head = {}, #head
  for i = 1, n_head do
    -- A member that is not "<ts>|ns/name" names no pod: popping it discards it.
    local member = head[i]
    local bar = find(member, '|', 1, true)
    keys[i] = bar and sub(member, bar + 1) or ''
  end
  local records = redis.call('HMGET', KEYS[4], unpack(keys))
  for i = 1, n_head do
    -- An activeQ member without a record cannot be scheduled; popping it discards it.
    -- (rec_pop: the update seen during an earlier attempt, u, is this attempt's object.)
    local key = keys[i]
    if key ~= '' then lease(key, records[i]) end
  end
end
-- The head looked at, exactly: nothing ran between the reads and this. (By rank, not
-- ZPOPMIN: its reply, every member and score again, would only be thrown away.)
if examined > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, examined - 1) end

-- activeQ is empty here unless max_pods were taken: the rest from backoffQ, window by window.
local popped_from_backoff = 0
if from_backoff and taken < max_pods then
  local looked, window_from = 0, '-inf'
  while taken < max_pods and looked < BACKOFF_LOOK do
    local first = redis.call('ZRANGEBYSCORE', KEYS[10], window_from, '+inf', 'WITHSCORES',
                             'LIMIT', 0, 1)
    if #first == 0 then break end
    local window = math.floor(tonumber(first[2]) / WINDOW_MS)
    local window_end = string.format('%d', (window + 1) * WINDOW_MS)
    local members = redis.call('ZRANGEBYSCORE', KEYS[10], window_from, '(' .. window_end,
                               'LIMIT', 0, BACKOFF_LOOK - looked)
    looked = looked + #members
    window_from = window_end
    local records = redis.call('HMGET', KEYS[4], unpack(members))
    local rejected = {}
    for i, key in ipairs(members) do
      local r = rec_decode(records[i])
      if r and r.w == 'backoff' and r.pl ~= '' then
        rejected[#rejected + 1] = { key = key, p = r.p, ts = r.ts, text = records[i] }
      end
    end
    table.sort(rejected, function(x, y)
      if x.p ~= y.p then return x.p > y.p end
      if x.ts ~= y.ts then return x.ts < y.ts end
      return x.key < y.key
    end)
    for _, c in ipairs(rejected) do
      if taken >= max_pods then break end
      redis.call('ZREM', KEYS[10], c.key)
      if lease(c.key, c.text) then popped_from_backoff = popped_from_backoff + 1 end
    end
  end
end

-- Gangs: the siblings of popped members come along (every head member was handled above,
-- so a sibling still in activeQ lies beyond the popped head).
if n_out > 1 and redis.call('EXISTS', KEYS[8]) == 1 then
  local popped = {}
  for i = 2, n_out, 2 do popped[#popped + 1] = out[i] end
  local groups = hmget_all(KEYS[8], popped)
  local have, done = {}, {}
  for _, key in ipairs(popped) do have[key] = true end
  local from = { active = KEYS[1], backoff = KEYS[10], unschedulable = KEYS[11] }
  for n = 1, #popped do
    local group = groups[n]
    if group and not done[group] then
      done[group] = true
      for _, m in ipairs(gang_members(KEYS[9], group)) do
        local raw = not have[m] and redis.call('HGET', KEYS[4], m)
        local r = raw and rec_decode(raw)
        if r and from[r.w] then
          have[m] = true
          if r.w == 'active' then
            redis.call('ZREM', KEYS[1], active_member(r.ts, m))
          else
            redis.call('ZREM', from[r.w], m)
          end
          lease(m, raw)
        end
      end
    end
  end
end
if #fields > 0 then redis.call('HSET', KEYS[4], unpack(fields)) end
zadd_all(KEYS[2], leases)
if #dead > 0 then redis.call('ZADD', KEYS[3], unpack(dead)) end
redis.call('SET', KEYS[5], cycle)
redis.call('SET', KEYS[6], epoch)
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[7]) end
out[1] = popped_from_backoff
return out
