-- Number helpers shared by the ledger and store scripts and by lib/queue_record.lua (included
-- with "--!include numbers").

-- A non-negative integer that a double holds exactly (JSON numbers arrive as doubles).
-- (v % 1 is NaN for an infinity; a NaN fails v >= 0.)
local type = type
local function is_count(v)
  return type(v) == 'number' and v >= 0 and v % 1 == 0 and v < 9007199254740992
end

-- tonumber of a text that repeats across a call's items (node indexes, counts, priorities,
-- kind slots): parsed once per distinct text. tonumber runs strtod, some 800 instructions
-- on a short text, where a table lookup of an interned string costs a few dozen.
local parsed_numbers = {}
local function number_of(text)
  if text == nil then return nil end
  local n = parsed_numbers[text]
  if n == nil then
    n = tonumber(text) or false
    parsed_numbers[text] = n
  end
  return n or nil
end

-- An integer as Redis wants it in a command (no exponent, no ".0").
local function int(n)
  return string.format('%d', n)
end
