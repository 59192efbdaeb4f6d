-- queue_add: new pods into activeQ (or the gated set); pods already known are left alone.
--
-- KEYS[1]  hash  info           ns/name -> queue record (lib/queue_record.lua)
-- KEYS[2]  zset  activeQ        member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  zset  gated          member ns/name, score queue timestamp (ms)
-- KEYS[4]  list  wake           wake-up tokens for blocking pops
-- KEYS[5]  hash  gang:of        ns/name -> pod group (lib/gang.lua)
-- KEYS[6]  hash  gang:members   pod group -> comma-joined member keys
-- KEYS[7]  hash  gang:min       pod group -> its minimum
-- KEYS[8]  set   gang:held      members gated only because their group is incomplete
-- ARGV[1]  int   now_ms         queue timestamp (and initial attempt timestamp) of new pods
-- ARGV[2]  int   wake_cap       longest the wake list may grow
-- ARGV[3+5i .. 7+5i]  per pod:  key (ns/name), uid (str), priority (int32), gated (0|1),
--                               pod group ("ns/name", "" for none)
-- A pod of a group joins it; while the group has no PodGroup or fewer members than its
-- minimum the pod is held in the gated set (gang:held); the member that completes the
-- group releases every held member into activeQ with it.
-- Returns: {active, gated}: how many pods were added to activeQ and to the gated set
-- (held members released count as active, and not as gated).

--!include queue_record
--!include precheck
--!include bulk
--!include gang

local now = tonumber(ARGV[1])
local wake_cap = tonumber(ARGV[2])
if not now or not wake_cap or wake_cap < 1 then
  return redis.error_reply('queue_add: now_ms and wake_cap must be numbers')
end
if (#ARGV - 2) % 5 ~= 0 then
  return redis.error_reply('queue_add: pods come as key, uid, priority, gated, group quintuples')
end
local keys = {}
for i = 3, #ARGV, 5 do
  local p = tonumber(ARGV[i + 2])
  if string.find(ARGV[i], '|', 1, true) then
    return redis.error_reply('queue_add: pod key must not contain "|": ' .. ARGV[i])
  end
  if not p or p ~= math.floor(p) or p < -2147483648 or p > 2147483647 then
    return redis.error_reply('queue_add: priority must be an int32: ' .. ARGV[i + 2])
  end
  if ARGV[i + 3] ~= '0' and ARGV[i + 3] ~= '1' then
    return redis.error_reply('queue_add: gated must be 0 or 1')
  end
  keys[#keys + 1] = ARGV[i]
end
if #keys == 0 then return {0, 0} end
local bad = wrong_types('queue_add', {{KEYS[1], 'hash'}, {KEYS[2], 'zset'}, {KEYS[3], 'zset'},
                                      {KEYS[4], 'list'}, {KEYS[5], 'hash'}, {KEYS[6], 'hash'},
                                      {KEYS[7], 'hash'}, {KEYS[8], 'set'}})
if bad then return redis.error_reply(bad) end

local known = hmget_all(KEYS[1], keys)
local fields, gated, seen, groups, held = {}, {}, {}, {}, {}
local activated = 0
local widened = skiplist_begin(KEYS[2], #keys)
for n, key in ipairs(keys) do
  if not known[n] and not seen[key] then
    seen[key] = true
    local i = 3 + 5 * (n - 1)
    local r = rec_new(ARGV[i + 1], tonumber(ARGV[i + 2]), now)
    local group = ARGV[i + 4]
    if group ~= '' then
      gang_join(KEYS[5], KEYS[6], key, group)
      if not groups[group] then
        groups[group] = true
        groups[#groups + 1] = group
      end
    end
    if group ~= '' and ARGV[i + 3] ~= '1' then
      -- Held until the group is complete (released below, once every new member joined).
      r.w = 'gated'
      gated[#gated + 1] = now
      gated[#gated + 1] = key
      held[#held + 1] = key
    elseif ARGV[i + 3] == '1' then
      r.w = 'gated'
      gated[#gated + 1] = now
      gated[#gated + 1] = key
    else
      to_active(key, r, KEYS[2])
      activated = activated + 1
    end
    fields[#fields + 1] = key
    fields[#fields + 1] = rec_encode(r)
  end
end
skiplist_end(KEYS[2], widened)
if #fields == 0 then return {0, 0} end
in_slices('HSET', KEYS[1], fields)
in_slices('ZADD', KEYS[3], gated)
in_slices('SADD', KEYS[8], held)
local still_gated = #gated / 2
for _, group in ipairs(groups) do
  if gang_complete(KEYS[6], KEYS[7], group) then
    for _, m in ipairs(gang_release(KEYS[1], KEYS[2], KEYS[3], KEYS[6], KEYS[8], group)) do
      activated = activated + 1
      if seen[m] then still_gated = still_gated - 1 end
    end
  end
end
wake(KEYS[4], activated, wake_cap)
return {activated, still_gated}
