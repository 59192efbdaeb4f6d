-- queue_add_unschedulable: kube's AddUnschedulableIfNotPresent, the failure handler's entry.
-- Accepted only from the holder of the pod's last lease (epoch match) while the pod is not
-- waiting in a sub-queue. The pod gets a new queue timestamp, its unschedulable plugins
-- and a backoff expiry of now + backoff(attempts). It goes to backoffQ on error, or when a
-- move request arrived during or after its scheduling cycle (moveRequestCycle >= cycle),
-- else to the unschedulable set. A pod whose object was updated while it was in flight
-- (info u = 1, see queue_update) goes to activeQ instead: kube's Update already put it
-- there, and its AddUnschedulableIfNotPresent finds it present.
--
-- KEYS[1]  hash    info           ns/name -> JSON info
-- KEYS[2]  zset    inflight       member ns/name
-- KEYS[3]  zset    backoffQ       member ns/name, score backoff expiry (ms)
-- KEYS[4]  zset    unschedulable  member ns/name, score queue timestamp (ms)
-- KEYS[5]  string  move_cycle     scheduling cycle of the last move request
-- KEYS[6]  zset    activeQ        member "<ts:013d>|ns/name", score -priority
-- KEYS[7]  list    wake           wake-up tokens for blocking pops
-- ARGV[1]  str     key            ns/name
-- ARGV[2]  int     epoch          lease epoch returned by the pop
-- ARGV[3]  str     plugins        comma-joined unschedulable plugin names ('' = none)
-- ARGV[4]  int     now_ms
-- ARGV[5]  0|1     error          1 = the attempt failed with an error (always backoff)
-- ARGV[6]  int     initial_backoff_ms
-- ARGV[7]  int     max_backoff_ms
-- ARGV[8]  int     wake_cap       longest the wake list may grow
-- Returns: 'stale' | 'present' | 'backoff' | 'unschedulable' | 'active'.

--!include activeq

local key, plugins = ARGV[1], ARGV[3]
local epoch, now = tonumber(ARGV[2]), tonumber(ARGV[4])
local initial, max_backoff = tonumber(ARGV[6]), tonumber(ARGV[7])
local wake_cap = tonumber(ARGV[8])
if not epoch or not now or not initial or not max_backoff or not wake_cap or wake_cap < 1 then
  return redis.error_reply('queue_add_unschedulable: numeric arguments expected')
end
if ARGV[5] ~= '0' and ARGV[5] ~= '1' then
  return redis.error_reply('queue_add_unschedulable: error must be 0 or 1')
end

local raw = redis.call('HGET', KEYS[1], key)
if not raw then return 'stale' end
local info = cjson.decode(raw)
if info.e ~= epoch then return 'stale' end
if info.w ~= 'inflight' and info.w ~= 'assumed' and info.w ~= '' then return 'present' end

-- kube's calculateBackoffDuration, overflow-safe doubling.
local duration = initial
for _ = 2, info.a do
  if duration > max_backoff - duration then
    duration = max_backoff
    break
  end
  duration = duration + duration
end

local move_cycle = tonumber(redis.call('GET', KEYS[5]) or '0')
redis.call('ZREM', KEYS[2], key)
info.ts = now
info.pl = plugins
info.d = 0
info.bo = now + duration
if info.u == 1 then
  info.u = nil
  info.w = 'active'
  info.m = active_member(now, key)
  redis.call('ZADD', KEYS[6], -info.p, info.m)
  wake(KEYS[7], 1, wake_cap)
elseif ARGV[5] == '1' or move_cycle >= info.cy then
  info.w = 'backoff'
  redis.call('ZADD', KEYS[3], info.bo, key)
else
  info.w = 'unschedulable'
  redis.call('ZADD', KEYS[4], now, key)
end
redis.call('HSET', KEYS[1], key, cjson.encode(info))
return info.w
