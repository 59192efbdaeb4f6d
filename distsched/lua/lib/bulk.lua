-- Bulk commands over lists of any length (included with "--!include bulk"). Lua's unpack()
-- takes a few thousand values at most, so long lists go in slices; a flat list of pairs
-- is cut at even positions.

local BULK_SLICE = 2000

-- redis.call(command, key, <flat...>) in slices.
local function in_slices(command, key, flat)
  for first = 1, #flat, BULK_SLICE do
    redis.call(command, key, unpack(flat, first, math.min(first + BULK_SLICE - 1, #flat)))
  end
end

-- HMGET of any number of fields; values in field order (false when absent).
local function hmget_all(hash, fields)
  local values = {}
  for first = 1, #fields, BULK_SLICE do
    local part = redis.call('HMGET', hash,
      unpack(fields, first, math.min(first + BULK_SLICE - 1, #fields)))
    for j = 1, #part do values[first + j - 1] = part[j] end
  end
  return values
end
