-- Gang membership for the queue (included with "--!include gang" after queue_record): which
-- pods belong to which pod group, each group's minimum, and the pods held back until their
-- group has that many members. kube's GangScheduling PreEnqueue, kept where the moves are
-- so that a pop can take a whole gang atomically.
--
--   q:gang:of       hash  ns/name -> group "ns/name" (every existing pod of a group that
--                         went through the queue, pending or placed; left on its delete)
--   q:gang:members  hash  group -> comma-joined member keys (the same pods)
--   q:gang:min      hash  group -> its minimum (from the PodGroup; absent: no PodGroup yet)
--   q:gang:held     set   members in the gated set only because their group is incomplete
--
-- Pod keys never hold ',' (ns/name of DNS labels), so a member list is a plain string.

local function gang_members(members_key, group)
  local list = redis.call('HGET', members_key, group)
  local out = {}
  if list then
    for key in string.gmatch(list, '[^,]+') do out[#out + 1] = key end
  end
  return out
end

-- Take `key` out of `group`'s member list.
local function gang_drop(members_key, group, key)
  local keep = {}
  for _, m in ipairs(gang_members(members_key, group)) do
    if m ~= key then keep[#keep + 1] = m end
  end
  if #keep == 0 then redis.call('HDEL', members_key, group)
  else redis.call('HSET', members_key, group, table.concat(keep, ',')) end
end

-- Record `key` as a member of `group` (idempotent; a pod that moved groups leaves its old one).
local function gang_join(of_key, members_key, key, group)
  local old = redis.call('HGET', of_key, key)
  if old == group then return end
  if old then gang_drop(members_key, old, key) end
  redis.call('HSET', of_key, key, group)
  local list = redis.call('HGET', members_key, group)
  redis.call('HSET', members_key, group, list and (list .. ',' .. key) or key)
end

-- Forget `key`'s membership (its pod was deleted).
local function gang_leave(of_key, members_key, held_key, key)
  local group = redis.call('HGET', of_key, key)
  if not group then return end
  redis.call('HDEL', of_key, key)
  redis.call('SREM', held_key, key)
  gang_drop(members_key, group, key)
end

-- Whether the group has a PodGroup and at least its minimum of members.
local function gang_complete(members_key, min_key, group)
  local min = tonumber(redis.call('HGET', min_key, group) or '')
  if not min then return false end
  return #gang_members(members_key, group) >= min
end

-- Release the group's held members into activeQ (its gang became complete). Returns the
-- keys that became active.
local function gang_release(info_key, active_key, gated_key, members_key, held_key, group)
  local released = {}
  for _, m in ipairs(gang_members(members_key, group)) do
    if redis.call('SREM', held_key, m) == 1 then
      local r = rec_decode(redis.call('HGET', info_key, m))
      if r and r.w == 'gated' then
        redis.call('ZREM', gated_key, m)
        to_active(m, r, active_key)
        redis.call('HSET', info_key, m, rec_encode(r))
        released[#released + 1] = m
      end
    end
  end
  return released
end
