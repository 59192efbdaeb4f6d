-- Number helpers shared by the ledger scripts (included with "--!include numbers").

-- A non-negative integer that a double holds exactly (JSON numbers arrive as doubles).
-- (v % 1 is NaN for an infinity; a NaN fails v >= 0.)
local type = type
local function is_count(v)
  return type(v) == 'number' and v >= 0 and v % 1 == 0 and v < 9007199254740992
end

-- An integer as Redis wants it in a command (no exponent, no ".0").
local function int(n)
  return string.format('%d', n)
end
