-- queue_gang_min: a PodGroup was created, changed or deleted: record its minimum (or forget
-- it), and release the group's held members into activeQ once it has that many members.
--
-- KEYS[1]  hash  info           ns/name -> queue record (lib/queue_record.lua)
-- KEYS[2]  zset  activeQ        member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  zset  gated          member ns/name, score queue timestamp (ms)
-- KEYS[4]  list  wake           wake-up tokens for blocking pops
-- KEYS[5]  hash  gang:members   pod group -> comma-joined member keys (lib/gang.lua)
-- KEYS[6]  hash  gang:min       pod group -> its minimum
-- KEYS[7]  set   gang:held      members gated only because their group is incomplete
-- ARGV[1]  int   wake_cap       longest the wake list may grow
-- then pairs: pod group ("ns/name"), minimum (an integer >= 1, or "" when the PodGroup
--             is gone: its members that are held stay held)
-- Returns: the number of held members released into activeQ.

--!include queue_record
--!include precheck
--!include gang

local wake_cap = tonumber(ARGV[1])
if not wake_cap or wake_cap < 1 or #ARGV % 2 ~= 1 then
  return redis.error_reply('queue_gang_min: wake_cap, then group, minimum pairs')
end
for i = 2, #ARGV, 2 do
  local min = ARGV[i + 1]
  if min ~= '' and (not tonumber(min) or tonumber(min) < 1 or tonumber(min) ~= math.floor(tonumber(min))) then
    return redis.error_reply('queue_gang_min: minimum must be a positive integer: ' .. min)
  end
end
local bad = wrong_types('queue_gang_min', {{KEYS[1], 'hash'}, {KEYS[2], 'zset'},
  {KEYS[3], 'zset'}, {KEYS[4], 'list'}, {KEYS[5], 'hash'}, {KEYS[6], 'hash'}, {KEYS[7], 'set'}})
if bad then return redis.error_reply(bad) end

local released = 0
for i = 2, #ARGV, 2 do
  local group, min = ARGV[i], ARGV[i + 1]
  if min == '' then
    redis.call('HDEL', KEYS[6], group)
  else
    redis.call('HSET', KEYS[6], group, min)
    if gang_complete(KEYS[5], KEYS[6], group) then
      released = released + #gang_release(KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[7], group)
    end
  end
end
wake(KEYS[4], released, wake_cap)
return released
