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
-- ARGV[1]  int     max_pods        1 .. 1000
-- ARGV[2]  int     now_ms
-- ARGV[3]  int     lease_ms        lease length
-- ARGV[4]  int     max_deliveries
-- Returns: flat array {key1, record1, key2, record2, ...} in pop order; an error, with
-- nothing written, when a key holds another type or a counter is not a number.

--!include queue_record
--!include precheck

local max_pods = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local lease_ms = tonumber(ARGV[3])
local max_deliveries = tonumber(ARGV[4])
if not max_pods or max_pods < 1 or max_pods > 1000 or not now or not lease_ms
    or not max_deliveries then
  return redis.error_reply('queue_pop: max_pods (1..1000), now_ms, lease_ms, max_deliveries must be numbers')
end
local bad = wrong_types('queue_pop', {{KEYS[1], 'zset'}, {KEYS[2], 'zset'}, {KEYS[3], 'zset'},
                                      {KEYS[4], 'hash'}})
if bad then return redis.error_reply(bad) end
local cycle, epoch, err
cycle, err = read_counter('queue_pop', KEYS[5])
if err then return redis.error_reply(err) end
epoch, err = read_counter('queue_pop', KEYS[6])
if err then return redis.error_reply(err) end

-- Read first (the head of activeQ, window by window, and the records), write after: a
-- pop that fails leaves every pod where it was.
local out, fields, leases, dead = {}, {}, {}, {}
local taken, examined = 0, 0
while taken < max_pods do
  local head = redis.call('ZRANGE', KEYS[1], examined, examined + max_pods - taken - 1)
  if #head == 0 then break end
  examined = examined + #head
  local keys = {}
  for i, member in ipairs(head) do
    -- A member that is not "<ts>|ns/name" names no pod: popping it discards it.
    local bar = string.find(member, '|', 1, true)
    keys[i] = bar and string.sub(member, bar + 1) or ''
  end
  local records = redis.call('HMGET', KEYS[4], unpack(keys))
  for n, key in ipairs(keys) do
    -- An activeQ member without a record cannot be scheduled; popping it discards it.
    -- (rec_pop: the update seen during an earlier attempt, u, is this attempt's object.)
    local text, dead_lettered = nil, false
    if key ~= '' then
      text, dead_lettered = rec_pop(records[n], cycle + 1, epoch + 1, max_deliveries)
    end
    if text then
      fields[#fields + 1] = key
      fields[#fields + 1] = text
      if dead_lettered then
        dead[#dead + 1] = now
        dead[#dead + 1] = key
      else
        cycle = cycle + 1
        epoch = epoch + 1
        leases[#leases + 1] = now + lease_ms
        leases[#leases + 1] = key
        taken = taken + 1
        out[#out + 1] = key
        out[#out + 1] = text
      end
    end
  end
end
-- The head looked at, exactly: nothing ran between the reads and this.
if examined > 0 then redis.call('ZPOPMIN', KEYS[1], examined) end
if #fields > 0 then redis.call('HSET', KEYS[4], unpack(fields)) end
if #leases > 0 then redis.call('ZADD', KEYS[2], unpack(leases)) end
if #dead > 0 then redis.call('ZADD', KEYS[3], unpack(dead)) end
redis.call('SET', KEYS[5], cycle)
redis.call('SET', KEYS[6], epoch)
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[7]) end
return out
