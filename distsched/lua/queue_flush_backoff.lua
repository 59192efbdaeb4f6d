-- queue_flush_backoff: kube's flushBackoffQCompleted; pods whose backoff expired go to
-- activeQ, keeping their queue timestamp.
--
-- KEYS[1]  zset  backoffQ  member ns/name, score backoff expiry (ms)
-- KEYS[2]  zset  activeQ   member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  hash  info      ns/name -> queue record (lib/queue_record.lua)
-- KEYS[4]  list  wake      wake-up tokens for blocking pops
-- ARGV[1]  int   now_ms    pods with expiry <= now_ms move
-- ARGV[2]  int   wake_cap  longest the wake list may grow
-- Returns: {moved, examined}: pods moved, and due members looked at (at most 1000 per call:
-- the caller calls again while examined is 1000).

--!include queue_record
--!include precheck
--!include bulk

local now, wake_cap = tonumber(ARGV[1]), tonumber(ARGV[2])
if not now or not wake_cap or wake_cap < 1 then
  return redis.error_reply('queue_flush_backoff: now_ms and wake_cap must be numbers')
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1000)
if #due == 0 then return {0, 0} end
local bad = wrong_types('queue_flush_backoff', {{KEYS[2], 'zset'}, {KEYS[3], 'hash'},
                                                {KEYS[4], 'list'}})
if bad then return redis.error_reply(bad) end
-- Read every record before the first write; a member without one is only discarded.
local records = redis.call('HMGET', KEYS[3], unpack(due))
redis.call('ZREM', KEYS[1], unpack(due))
local fields = {}
local widened = skiplist_begin(KEYS[2], #due)
for i, key in ipairs(due) do
  local r = rec_decode(records[i])
  if r then
    to_active(key, r, KEYS[2])
    fields[#fields + 1] = key
    fields[#fields + 1] = rec_encode(r)
  end
end
skiplist_end(KEYS[2], widened)
if #fields > 0 then redis.call('HSET', KEYS[3], unpack(fields)) end
wake(KEYS[4], #fields / 2, wake_cap)
return {#fields / 2, #due}
