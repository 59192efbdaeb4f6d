-- queue_delete: remove pods from whichever sub-queue holds them and drop their record.
-- A pod given with a uid is removed only while its record has that uid: a deleted pod's
-- handler must not remove the record of a pod re-created under the same name since.
--
-- KEYS[1]  hash  info           ns/name -> queue record (lib/queue_record.lua)
-- KEYS[2]  zset  activeQ        member "<ts:013d>|ns/name"
-- KEYS[3]  zset  backoffQ       member ns/name
-- KEYS[4]  zset  unschedulable  member ns/name
-- KEYS[5]  zset  gated          member ns/name
-- KEYS[6]  zset  inflight       member ns/name
-- KEYS[7]  zset  dead           member ns/name
-- KEYS[8]  hash  gang:of        ns/name -> pod group (lib/gang.lua): a deleted pod leaves
--                               its group (a bound one too, which has no record any more)
-- KEYS[9]  hash  gang:members   pod group -> comma-joined member keys
-- KEYS[10] set   gang:held      members gated until their group is complete
-- ARGV[2i-1]  str  pod key (ns/name)
-- ARGV[2i]    str  its uid, or "" for whatever pod holds the name
-- Returns: integer, the number of pods that were known and are now gone.

--!include queue_record
--!include precheck
--!include gang

if #ARGV % 2 ~= 0 then return redis.error_reply('queue_delete: expects key, uid pairs') end
local bad = wrong_types('queue_delete', {{KEYS[1], 'hash'}, {KEYS[2], 'zset'}, {KEYS[3], 'zset'},
  {KEYS[4], 'zset'}, {KEYS[5], 'zset'}, {KEYS[6], 'zset'}, {KEYS[7], 'zset'}})
if bad then return redis.error_reply(bad) end
local set_of = {backoff = KEYS[3], unschedulable = KEYS[4], gated = KEYS[5],
                inflight = KEYS[6], dead = KEYS[7]}
local deleted = 0
for i = 1, #ARGV, 2 do
  local key, uid = ARGV[i], ARGV[i + 1]
  local raw = redis.call('HGET', KEYS[1], key)
  local r = raw and rec_decode(raw)
  if raw and (uid == '' or not r or r.uid == uid) then
    if r and r.w == 'active' then
      redis.call('ZREM', KEYS[2], active_member(r.ts, key))
    elseif r and set_of[r.w] then
      redis.call('ZREM', set_of[r.w], key)
    end
    redis.call('HDEL', KEYS[1], key)
    deleted = deleted + 1
  end
  if not raw or uid == '' or not r or r.uid == uid then
    gang_leave(KEYS[8], KEYS[9], KEYS[10], key)
  end
end
return deleted
