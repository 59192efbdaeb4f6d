-- queue_add: new pods into activeQ (or the gated set); pods already known are left alone.
--
-- KEYS[1]  hash  info           ns/name -> JSON info
-- KEYS[2]  zset  activeQ        member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  zset  gated          member ns/name, score queue timestamp (ms)
-- KEYS[4]  list  wake           wake-up tokens for blocking pops
-- ARGV[1]  int   now_ms         queue timestamp (and initial attempt timestamp) of new pods
-- ARGV[2]  int   wake_cap       longest the wake list may grow
-- ARGV[3+4i .. 6+4i]  per pod:  key (ns/name), uid (str), priority (int32), gated (0|1)
-- Returns: integer, the number of pods added.

--!include activeq

local now = tonumber(ARGV[1])
local wake_cap = tonumber(ARGV[2])
if not now or not wake_cap or wake_cap < 1 then
  return redis.error_reply('queue_add: now_ms and wake_cap must be numbers')
end
if (#ARGV - 2) % 4 ~= 0 then
  return redis.error_reply('queue_add: pods come as key, uid, priority, gated quadruples')
end
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
end

local added, activated = 0, 0
for i = 3, #ARGV, 4 do
  local key = ARGV[i]
  if redis.call('HEXISTS', KEYS[1], key) == 0 then
    local p = tonumber(ARGV[i + 2])
    local info = {uid = ARGV[i + 1], p = p, ts = now, its = now, a = 0, w = 'gated', m = '',
                  pl = '', cy = 0, e = 0, d = 0, bo = 0}
    if ARGV[i + 3] == '1' then
      redis.call('ZADD', KEYS[3], now, key)
    else
      info.w = 'active'
      info.m = active_member(now, key)
      redis.call('ZADD', KEYS[2], -p, info.m)
      activated = activated + 1
    end
    redis.call('HSET', KEYS[1], key, cjson.encode(info))
    added = added + 1
  end
end

wake(KEYS[4], activated, wake_cap)
return added
