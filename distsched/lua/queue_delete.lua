-- queue_delete: remove pods from whichever sub-queue holds them and drop their info.
--
-- KEYS[1]  hash  info           ns/name -> JSON info
-- KEYS[2]  zset  activeQ        member "<ts:013d>|ns/name"
-- KEYS[3]  zset  backoffQ       member ns/name
-- KEYS[4]  zset  unschedulable  member ns/name
-- KEYS[5]  zset  gated          member ns/name
-- KEYS[6]  zset  inflight       member ns/name
-- KEYS[7]  zset  dead           member ns/name
-- ARGV[1..n]  str  pod keys (ns/name)
-- Returns: integer, the number of pods that were known and are now gone.

local set_of = {backoff = KEYS[3], unschedulable = KEYS[4], gated = KEYS[5],
                inflight = KEYS[6], dead = KEYS[7]}
local deleted = 0
for i = 1, #ARGV do
  local raw = redis.call('HGET', KEYS[1], ARGV[i])
  if raw then
    local info = cjson.decode(raw)
    if info.w == 'active' then
      redis.call('ZREM', KEYS[2], info.m)
    elseif set_of[info.w] then
      redis.call('ZREM', set_of[info.w], ARGV[i])
    end
    redis.call('HDEL', KEYS[1], ARGV[i])
    deleted = deleted + 1
  end
end
return deleted
