-- queue_flush_backoff: kube's flushBackoffQCompleted; pods whose backoff expired go to
-- activeQ, keeping their queue timestamp.
--
-- KEYS[1]  zset  backoffQ  member ns/name, score backoff expiry (ms)
-- KEYS[2]  zset  activeQ   member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  hash  info      ns/name -> JSON info
-- KEYS[4]  list  wake      wake-up tokens for blocking pops
-- ARGV[1]  int   now_ms    pods with expiry <= now_ms move
-- ARGV[2]  int   wake_cap  longest the wake list may grow
-- Returns: integer, the number of pods moved.

--!include activeq

local now, wake_cap = tonumber(ARGV[1]), tonumber(ARGV[2])
if not now or not wake_cap or wake_cap < 1 then
  return redis.error_reply('queue_flush_backoff: now_ms and wake_cap must be numbers')
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #due == 0 then return 0 end
-- Read every info before the first write; a member without info is only discarded.
local infos = {}
for i, key in ipairs(due) do
  local raw = redis.call('HGET', KEYS[3], key)
  infos[i] = raw and cjson.decode(raw)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local moved = 0
for i, key in ipairs(due) do
  local info = infos[i]
  if info then
    info.w = 'active'
    info.m = active_member(info.ts, key)
    redis.call('ZADD', KEYS[2], -info.p, info.m)
    redis.call('HSET', KEYS[3], key, cjson.encode(info))
    moved = moved + 1
  end
end
wake(KEYS[4], moved, wake_cap)
return moved
