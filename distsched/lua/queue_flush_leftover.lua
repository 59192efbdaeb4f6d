-- queue_flush_leftover: kube's flushUnschedulablePodsLeftover (the UnschedulableTimeout
-- event); pods unschedulable for longer than unschedulable_max_ms go to activeQ, or to
-- backoffQ while their backoff has not expired. When any pod moved, the move request is
-- recorded (move_cycle = cycle), as kube's movePodsToActiveOrBackoffQueue does.
--
-- KEYS[1]  zset  unschedulable  member ns/name, score queue timestamp (ms)
-- KEYS[2]  zset  activeQ        member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  zset  backoffQ       member ns/name, score backoff expiry (ms)
-- KEYS[4]  hash  info           ns/name -> queue record (lib/queue_record.lua)
-- KEYS[5]  list  wake           wake-up tokens for blocking pops
-- KEYS[6]  string  cycle        scheduling cycle counter
-- KEYS[7]  string  move_cycle   set to the current cycle when a pod moved
-- ARGV[1]  int   now_ms
-- ARGV[2]  int   unschedulable_max_ms  pods with timestamp < now - this move
-- ARGV[3]  int   wake_cap       longest the wake list may grow
-- Returns: {moved, examined}: pods moved (to activeQ or backoffQ), and members looked at
-- (at most 1000 per call: the caller calls again while examined is 1000).

--!include queue_record
--!include precheck

local now, max_ms, wake_cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if not now or not max_ms or not wake_cap or wake_cap < 1 then
  return redis.error_reply('queue_flush_leftover: numeric arguments expected')
end
-- kube: now - timestamp > max, so the bound is exclusive.
local bound = string.format('(%d', now - max_ms)
local stale = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', bound, 'LIMIT', 0, 1000)
if #stale == 0 then return {0, 0} end
local bad = wrong_types('queue_flush_leftover', {{KEYS[2], 'zset'}, {KEYS[3], 'zset'},
                                                 {KEYS[4], 'hash'}, {KEYS[5], 'list'}})
if bad then return redis.error_reply(bad) end
local cycle, err = read_counter('queue_flush_leftover', KEYS[6])
if err then return redis.error_reply(err) end
-- Read every record before the first write; a member without one is only discarded.
local records = redis.call('HMGET', KEYS[4], unpack(stale))
redis.call('ZREM', KEYS[1], unpack(stale))
local fields = {}
local activated = 0
for i, key in ipairs(stale) do
  local r = rec_decode(records[i])
  if r then
    if to_active_or_backoff(key, r, now, KEYS[2], KEYS[3]) then activated = activated + 1 end
    fields[#fields + 1] = key
    fields[#fields + 1] = rec_encode(r)
  end
end
if #fields > 0 then
  redis.call('HSET', KEYS[4], unpack(fields))
  redis.call('SET', KEYS[7], cycle)
end
wake(KEYS[5], activated, wake_cap)
return {#fields / 2, #stale}
