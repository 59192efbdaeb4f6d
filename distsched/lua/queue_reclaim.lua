-- queue_reclaim: inflight pods whose lease expired (their worker died or stalled) go back
-- to activeQ with their queue timestamp and attempts; deliveries stay counted, so a pod
-- that keeps killing workers is dead-lettered by queue_pop.
--
-- KEYS[1]  zset  inflight  member ns/name, score lease deadline (ms)
-- KEYS[2]  zset  activeQ   member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  hash  info      ns/name -> queue record (lib/queue_record.lua)
-- KEYS[4]  list  wake      wake-up tokens for blocking pops
-- ARGV[1]  int   now_ms    leases with deadline <= now_ms expired
-- ARGV[2]  int   wake_cap  longest the wake list may grow
-- Returns: array of the reclaimed pod keys, in deadline order (at most 1000 per call; the
-- caller calls again while it gets 1000).

--!include queue_record
--!include precheck

local now, wake_cap = tonumber(ARGV[1]), tonumber(ARGV[2])
if not now or not wake_cap or wake_cap < 1 then
  return redis.error_reply('queue_reclaim: now_ms and wake_cap must be numbers')
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1000)
if #expired == 0 then return expired end
local bad = wrong_types('queue_reclaim', {{KEYS[2], 'zset'}, {KEYS[3], 'hash'}, {KEYS[4], 'list'}})
if bad then return redis.error_reply(bad) end
-- Read every record before the first write; a member without one is only discarded.
local records = redis.call('HMGET', KEYS[3], unpack(expired))
redis.call('ZREM', KEYS[1], unpack(expired))
local reclaimed, fields = {}, {}
for i, key in ipairs(expired) do
  local r = rec_decode(records[i])
  if r then
    to_active(key, r, KEYS[2])
    fields[#fields + 1] = key
    fields[#fields + 1] = rec_encode(r)
    reclaimed[#reclaimed + 1] = key
  end
end
if #fields > 0 then redis.call('HSET', KEYS[3], unpack(fields)) end
wake(KEYS[4], #reclaimed, wake_cap)
return reclaimed
