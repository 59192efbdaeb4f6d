-- queue_assume: the queue's half of a reservation, alone (the ledger's cache_reserve does the
-- same move inside its own script): inflight pods leased under the given epoch leave
-- inflight and are recorded as assumed by the cache. Fenced per pod.
--
-- KEYS[1]  hash  info      ns/name -> queue record (lib/queue_record.lua)
-- KEYS[2]  zset  inflight  member ns/name, score lease deadline (ms)
-- ARGV[3i-2]  str  key     ns/name
-- ARGV[3i-1]  int  epoch   lease epoch returned by the pop
-- ARGV[3i]    str  uid     the pod's uid as the caller decided it
-- Returns: array of 1 (assumed) or 0 (stale lease, other uid or unknown pod), one per pod.

--!include queue_record

if #ARGV % 3 ~= 0 then return redis.error_reply('queue_assume: expects key, epoch, uid triples') end
for i = 2, #ARGV, 3 do
  if not tonumber(ARGV[i]) then return redis.error_reply('queue_assume: epoch must be a number') end
end
local out = {}
for i = 1, #ARGV, 3 do
  local key = ARGV[i]
  local r = rec_decode(redis.call('HGET', KEYS[1], key))
  if rec_assumable(r, tonumber(ARGV[i + 1]), ARGV[i + 2]) then
    rec_assume(r)
    redis.call('ZREM', KEYS[2], key)
    redis.call('HSET', KEYS[1], key, rec_encode(r))
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
