-- queue_flush_leftover: kube's flushUnschedulablePodsLeftover (the UnschedulableTimeout
-- event); pods unschedulable for longer than unschedulable_max_ms go to activeQ, or to
-- backoffQ while their backoff has not expired. When any pod moved, the move request is
-- recorded (move_cycle = cycle), as kube's movePodsToActiveOrBackoffQueue does.
--
-- KEYS[1]  zset  unschedulable  member ns/name, score queue timestamp (ms)
-- KEYS[2]  zset  activeQ        member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  zset  backoffQ       member ns/name, score backoff expiry (ms)
-- KEYS[4]  hash  info           ns/name -> JSON info
-- KEYS[5]  list  wake           wake-up tokens for blocking pops
-- KEYS[6]  string  cycle        scheduling cycle counter
-- KEYS[7]  string  move_cycle   set to the current cycle when a pod moved
-- ARGV[1]  int   now_ms
-- ARGV[2]  int   unschedulable_max_ms  pods with timestamp < now - this move
-- ARGV[3]  int   wake_cap       longest the wake list may grow
-- Returns: integer, the number of pods moved (to activeQ or backoffQ).

--!include activeq

local now, max_ms, wake_cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if not now or not max_ms or not wake_cap or wake_cap < 1 then
  return redis.error_reply('queue_flush_leftover: numeric arguments expected')
end
-- kube: now - timestamp > max, so the bound is exclusive.
local bound = string.format('(%d', now - max_ms)
local stale = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', bound)
if #stale == 0 then return 0 end
-- Read every info before the first write; a member without info is only discarded.
local infos = {}
for i, key in ipairs(stale) do
  local raw = redis.call('HGET', KEYS[4], key)
  infos[i] = raw and cjson.decode(raw)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', bound)
local moved, activated = 0, 0
for i, key in ipairs(stale) do
  local info = infos[i]
  if info then
    if to_active_or_backoff(key, info, now, KEYS[2], KEYS[3]) then
      activated = activated + 1
    end
    redis.call('HSET', KEYS[4], key, cjson.encode(info))
    moved = moved + 1
  end
end
if moved > 0 then redis.call('SET', KEYS[7], redis.call('GET', KEYS[6]) or '0') end
wake(KEYS[5], activated, wake_cap)
return moved
