-- Checks of the keys a queue script writes, made before its first write (included with
-- "--!include precheck"). Redis does not roll back a script that fails half way: a key an
-- operator set by hand to another type, or a counter that is no longer a number, must
-- fail the call with nothing written, not after a pod left one sub-queue and before it
-- entered the next. Each returns an error message, or nil when all is well.

-- Each {key, type} pair: the key is missing or holds that type ('zset', 'hash', ...).
local function wrong_types(script, expected)
  for _, e in ipairs(expected) do
    local t = redis.call('TYPE', e[1])['ok']
    if t ~= 'none' and t ~= e[2] then
      return script .. ': ' .. e[1] .. ' holds a ' .. t .. ', expected a ' .. e[2]
    end
  end
  return nil
end

-- A counter (a string key holding a non-negative integer, missing = 0): its value, or
-- nil and the error message.
local function read_counter(script, key)
  local err = wrong_types(script, {{key, 'string'}})
  if err then return nil, err end
  local raw = redis.call('GET', key)
  if not raw then return 0, nil end
  local n = tonumber(raw)
  if not n or n < 0 or n ~= math.floor(n) or n >= 9007199254740992 then
    return nil, script .. ': ' .. key .. ' is not a counter: ' .. string.format('%q', raw)
  end
  return n, nil
end
