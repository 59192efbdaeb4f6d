-- queue_add: new pods into activeQ (or the gated set); pods already known are left alone.
--
-- KEYS[1]  hash  info           ns/name -> queue record (lib/queue_record.lua)
-- KEYS[2]  zset  activeQ        member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  zset  gated          member ns/name, score queue timestamp (ms)
-- KEYS[4]  list  wake           wake-up tokens for blocking pops
-- ARGV[1]  int   now_ms         queue timestamp (and initial attempt timestamp) of new pods
-- ARGV[2]  int   wake_cap       longest the wake list may grow
-- ARGV[3+4i .. 6+4i]  per pod:  key (ns/name), uid (str), priority (int32), gated (0|1)
-- Returns: {active, gated}: how many pods were added to activeQ and to the gated set.

--!include queue_record
--!include precheck
--!include bulk

local now = tonumber(ARGV[1])
local wake_cap = tonumber(ARGV[2])
if not now or not wake_cap or wake_cap < 1 then
  return redis.error_reply('queue_add: now_ms and wake_cap must be numbers')
end
if (#ARGV - 2) % 4 ~= 0 then
  return redis.error_reply('queue_add: pods come as key, uid, priority, gated quadruples')
end
local keys = {}
for i = 3, #ARGV, 4 do
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
                                      {KEYS[4], 'list'}})
if bad then return redis.error_reply(bad) end

local known = hmget_all(KEYS[1], keys)
local fields, gated, seen = {}, {}, {}
local activated = 0
for n, key in ipairs(keys) do
  if not known[n] and not seen[key] then
    seen[key] = true
    local i = 3 + 4 * (n - 1)
    local r = rec_new(ARGV[i + 1], tonumber(ARGV[i + 2]), now)
    if ARGV[i + 3] == '1' then
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
if #fields == 0 then return {0, 0} end
in_slices('HSET', KEYS[1], fields)
in_slices('ZADD', KEYS[3], gated)
wake(KEYS[4], activated, wake_cap)
return {activated, #gated / 2}
