-- queue_reclaim: inflight pods whose lease expired (their worker died or stalled) go back
-- to activeQ with their queue timestamp and attempts; deliveries stay counted, so a pod
-- that keeps killing workers is dead-lettered by queue_pop.
--
-- KEYS[1]  zset  inflight  member ns/name, score lease deadline (ms)
-- KEYS[2]  zset  activeQ   member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  hash  info      ns/name -> JSON info
-- KEYS[4]  list  wake      wake-up tokens for blocking pops
-- ARGV[1]  int   now_ms    leases with deadline <= now_ms expired
-- ARGV[2]  int   wake_cap  longest the wake list may grow
-- Returns: array of the reclaimed pod keys, in deadline order.

--!include activeq

local now, wake_cap = tonumber(ARGV[1]), tonumber(ARGV[2])
if not now or not wake_cap or wake_cap < 1 then
  return redis.error_reply('queue_reclaim: now_ms and wake_cap must be numbers')
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #expired == 0 then return expired end
-- Read every info before the first write; a member without info is only discarded.
local infos = {}
for i, key in ipairs(expired) do
  local raw = redis.call('HGET', KEYS[3], key)
  infos[i] = raw and cjson.decode(raw)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local reclaimed = {}
for i, key in ipairs(expired) do
  local info = infos[i]
  if info then
    info.w = 'active'
    info.m = active_member(info.ts, key)
    redis.call('ZADD', KEYS[2], -info.p, info.m)
    redis.call('HSET', KEYS[3], key, cjson.encode(info))
    reclaimed[#reclaimed + 1] = key
  end
end
wake(KEYS[4], #reclaimed, wake_cap)
return reclaimed
