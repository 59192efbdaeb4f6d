-- queue_requeue_released: the queue's half of releasing an assumed pod without a binding,
-- alone (cache_release's expire mode does the same inside its own script): each pod still
-- assumed goes to backoffQ for the backoff of its attempts, or to activeQ when that is 0.
--
-- KEYS[1]  hash  info      ns/name -> queue record (lib/queue_record.lua)
-- KEYS[2]  zset  activeQ   member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  zset  backoffQ  member ns/name, score backoff expiry (ms)
-- KEYS[4]  list  wake      wake-up tokens for blocking pops
-- ARGV[1]  int   now_ms
-- ARGV[2]  int   initial_backoff_ms
-- ARGV[3]  int   max_backoff_ms
-- ARGV[4]  int   wake_cap
-- ARGV[5..] str  pod keys (ns/name)
-- Returns: array, per pod, where it went ('backoff' | 'active'), or '' (not assumed).

--!include queue_record
--!include precheck

local now, initial, maximum = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local wake_cap = tonumber(ARGV[4])
if not now or not initial or not maximum or not wake_cap or wake_cap < 1 then
  return redis.error_reply('queue_requeue_released: numeric arguments expected')
end
local bad = wrong_types('queue_requeue_released', {{KEYS[1], 'hash'}, {KEYS[2], 'zset'},
                                                   {KEYS[3], 'zset'}, {KEYS[4], 'list'}})
if bad then return redis.error_reply(bad) end
local out = {}
local activated = 0
for i = 5, #ARGV do
  local key = ARGV[i]
  local r = rec_decode(redis.call('HGET', KEYS[1], key))
  if r and r.w == 'assumed' then
    if rec_requeue_released(key, r, now, initial, maximum, KEYS[2], KEYS[3]) then
      activated = activated + 1
    end
    redis.call('HSET', KEYS[1], key, rec_encode(r))
    out[#out + 1] = r.w
  else
    out[#out + 1] = ''
  end
end
wake(KEYS[4], activated, wake_cap)
return out
