-- queue_delete: remove pods from whichever sub-queue holds them and drop their record.
--
-- KEYS[1]  hash  info           ns/name -> queue record (lib/queue_record.lua)
-- KEYS[2]  zset  activeQ        member "<ts:013d>|ns/name"
-- KEYS[3]  zset  backoffQ       member ns/name
-- KEYS[4]  zset  unschedulable  member ns/name
-- KEYS[5]  zset  gated          member ns/name
-- KEYS[6]  zset  inflight       member ns/name
-- KEYS[7]  zset  dead           member ns/name
-- ARGV[1..n]  str  pod keys (ns/name)
-- Returns: integer, the number of pods that were known and are now gone.

--!include queue_record

local set_of = {backoff = KEYS[3], unschedulable = KEYS[4], gated = KEYS[5],
                inflight = KEYS[6], dead = KEYS[7]}
local deleted = 0
for i = 1, #ARGV do
  local raw = redis.call('HGET', KEYS[1], ARGV[i])
  if raw then
    local r = rec_decode(raw)
    if r and r.w == 'active' then
      redis.call('ZREM', KEYS[2], active_member(r.ts, ARGV[i]))
    elseif r and set_of[r.w] then
      redis.call('ZREM', set_of[r.w], ARGV[i])
    end
    redis.call('HDEL', KEYS[1], ARGV[i])
    deleted = deleted + 1
  end
end
return deleted
