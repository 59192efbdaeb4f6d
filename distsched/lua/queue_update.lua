-- queue_update: kube's PriorityQueue.Update for one pod whose object changed.
--   active        -> re-scored when the priority changed
--   backoff       -> stays (updated in place; the backoff flush moves it, as in kube)
--   unschedulable -> activeQ, or backoffQ while its backoff has not expired
--   gated         -> activeQ once no longer gated, else stays
--   inflight / assumed / '' -> new uid and priority recorded, and the pod is marked
--                    updated (info u = 1): kube puts a pod that is in no sub-queue into
--                    activeQ, so the attempt on the old object must not park it; the
--                    failure handler (queue_add_unschedulable) sends a marked pod to
--                    activeQ
--   dead          -> only the new uid and priority are recorded
--   unknown       -> added as by queue_add
--
-- KEYS[1]  hash  info           ns/name -> JSON info
-- KEYS[2]  zset  activeQ        member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  zset  backoffQ       member ns/name, score backoff expiry (ms)
-- KEYS[4]  zset  unschedulable  member ns/name, score queue timestamp (ms)
-- KEYS[5]  zset  gated          member ns/name, score queue timestamp (ms)
-- KEYS[6]  list  wake           wake-up tokens for blocking pops
-- ARGV[1]  int   now_ms
-- ARGV[2]  int   wake_cap       longest the wake list may grow
-- ARGV[3]  str   key            ns/name
-- ARGV[4]  str   uid
-- ARGV[5]  int   priority       int32
-- ARGV[6]  0|1   gated          PreEnqueue still rejects the pod
-- Returns: string, where the pod is afterwards (the info "w" value).

local now = tonumber(ARGV[1])
local wake_cap = tonumber(ARGV[2])
local key, uid, p, gated = ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6]
if not now or not wake_cap or wake_cap < 1 then
  return redis.error_reply('queue_update: now_ms and wake_cap must be numbers')
end
if not p or p ~= math.floor(p) or p < -2147483648 or p > 2147483647 then
  return redis.error_reply('queue_update: priority must be an int32')
end
if gated ~= '0' and gated ~= '1' then
  return redis.error_reply('queue_update: gated must be 0 or 1')
end
if string.find(key, '|', 1, true) then
  return redis.error_reply('queue_update: pod key must not contain "|"')
end

local function wake()
  redis.call('RPUSH', KEYS[6], '1')
  redis.call('LTRIM', KEYS[6], -wake_cap, -1)
end

local function to_active(info, from_key)
  redis.call('ZREM', from_key, key)
  info.w = 'active'
  info.m = string.format('%013d', info.ts) .. '|' .. key
  redis.call('ZADD', KEYS[2], -info.p, info.m)
  wake()
end

local raw = redis.call('HGET', KEYS[1], key)
if not raw then
  local info = {uid = uid, p = p, ts = now, its = now, a = 0, w = 'gated', m = '', pl = '',
                cy = 0, e = 0, d = 0, bo = 0}
  if gated == '1' then
    redis.call('ZADD', KEYS[5], now, key)
  else
    info.w = 'active'
    info.m = string.format('%013d', now) .. '|' .. key
    redis.call('ZADD', KEYS[2], -p, info.m)
    wake()
  end
  redis.call('HSET', KEYS[1], key, cjson.encode(info))
  return info.w
end

local info = cjson.decode(raw)
local old_p = info.p
info.uid = uid
info.p = p
if info.w == 'active' then
  if old_p ~= p then redis.call('ZADD', KEYS[2], -p, info.m) end
elseif info.w == 'unschedulable' then
  if info.bo > now then
    redis.call('ZREM', KEYS[4], key)
    info.w = 'backoff'
    redis.call('ZADD', KEYS[3], info.bo, key)
  else
    to_active(info, KEYS[4])
  end
elseif info.w == 'inflight' or info.w == 'assumed' or info.w == '' then
  info.u = 1
elseif info.w == 'gated' and gated == '0' then
  to_active(info, KEYS[5])
end
redis.call('HSET', KEYS[1], key, cjson.encode(info))
return info.w
