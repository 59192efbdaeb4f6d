-- queue_update: kube's PriorityQueue.Update for one pod whose object changed.
--   active        -> re-scored when the priority changed
--   backoff       -> stays (updated in place; the backoff flush moves it, as in kube)
--   unschedulable -> activeQ, or backoffQ while its backoff has not expired
--   gated         -> activeQ once no longer gated, else stays
--   inflight / assumed / '' -> new uid and priority recorded, and the pod is marked
--                    updated (u = 1): kube puts a pod that is in no sub-queue into
--                    activeQ, so the attempt on the old object must not park it; the
--                    failure handler (queue_add_unschedulable) sends a marked pod to
--                    activeQ
--   dead          -> only the new uid and priority are recorded
--   unknown       -> added as by queue_add
--
-- KEYS[1]  hash  info           ns/name -> queue record (lib/queue_record.lua)
-- KEYS[2]  zset  activeQ        member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  zset  backoffQ       member ns/name, score backoff expiry (ms)
-- KEYS[4]  zset  unschedulable  member ns/name, score queue timestamp (ms)
-- KEYS[5]  zset  gated          member ns/name, score queue timestamp (ms)
-- KEYS[6]  list  wake           wake-up tokens for blocking pops
-- KEYS[7]  hash  gang:of        ns/name -> pod group (lib/gang.lua)
-- KEYS[8]  hash  gang:members   pod group -> comma-joined member keys
-- KEYS[9]  hash  gang:min       pod group -> its minimum
-- KEYS[10] set   gang:held      members gated until their group is complete
-- ARGV[1]  int   now_ms
-- ARGV[2]  int   wake_cap       longest the wake list may grow
-- ARGV[3]  str   key            ns/name
-- ARGV[4]  str   uid
-- ARGV[5]  int   priority       int32
-- ARGV[6]  0|1   gated          PreEnqueue still rejects the pod
-- ARGV[7]  str   group          the pod's pod group ("" for none): a member of a group
--                               that is incomplete stays (or is) held in the gated set
-- Returns: {where, entered}: where the pod is afterwards (the record's w), and 1 if this
--          update put it into activeQ, backoffQ or the gated set (0 if it stayed).

--!include queue_record
--!include precheck
--!include gang

local now = tonumber(ARGV[1])
local wake_cap = tonumber(ARGV[2])
local key, uid, p, gated, group = ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6], ARGV[7] or ''
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
local bad = wrong_types('queue_update', {{KEYS[1], 'hash'}, {KEYS[2], 'zset'}, {KEYS[3], 'zset'},
  {KEYS[4], 'zset'}, {KEYS[5], 'zset'}, {KEYS[6], 'list'}, {KEYS[7], 'hash'}, {KEYS[8], 'hash'},
  {KEYS[9], 'hash'}, {KEYS[10], 'set'}})
if bad then return redis.error_reply(bad) end

-- Gang membership follows the object; a member of an incomplete group is held.
if group ~= '' then gang_join(KEYS[7], KEYS[8], key, group) end
local held = false
if group ~= '' and gated == '0' and not gang_complete(KEYS[8], KEYS[9], group) then
  held = true
  gated = '1'
end

local r = rec_decode(redis.call('HGET', KEYS[1], key))
if not r then
  r = rec_new(uid, p, now)
  if gated == '1' then
    r.w = 'gated'
    redis.call('ZADD', KEYS[5], now, key)
    if held then redis.call('SADD', KEYS[10], key) end
  else
    to_active(key, r, KEYS[2])
    wake(KEYS[6], 1, wake_cap)
  end
  redis.call('HSET', KEYS[1], key, rec_encode(r))
  return {r.w, 1}
end

local old_p = r.p
local entered = 0
r.uid = uid
r.p = p
if r.w == 'active' then
  if old_p ~= p then redis.call('ZADD', KEYS[2], -p, active_member(r.ts, key)) end
elseif r.w == 'unschedulable' then
  redis.call('ZREM', KEYS[4], key)
  if to_active_or_backoff(key, r, now, KEYS[2], KEYS[3]) then wake(KEYS[6], 1, wake_cap) end
  entered = 1
elseif r.w == 'inflight' or r.w == 'assumed' or r.w == '' then
  r.u = 1
elseif r.w == 'gated' and gated == '1' then
  if held then redis.call('SADD', KEYS[10], key) else redis.call('SREM', KEYS[10], key) end
elseif r.w == 'gated' and gated == '0' then
  redis.call('SREM', KEYS[10], key)
  redis.call('ZREM', KEYS[5], key)
  to_active(key, r, KEYS[2])
  wake(KEYS[6], 1, wake_cap)
  entered = 1
end
redis.call('HSET', KEYS[1], key, rec_encode(r))
return {r.w, entered}
