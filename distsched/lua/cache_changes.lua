--[[ cache_changes: the ledger's change feed since a version (read only).

KEYS[1]  string cache:feedver: ledger version counter
KEYS[2]  zset   cache:feed: node -> ledger version of its last change
KEYS[3]  hash   cache:usage: node -> "<gen>|<host ports in use, -1 unknown>|<res>=<amount>,..."
ARGV[1]  integer  the version the caller has seen (0 for everything)
Returns {current version, node 1, usage 1, node 2, usage 2, ...} for every node stamped
after ARGV[1] (a usage is false for a node deleted since).
]]

local since = tonumber(ARGV[1])
if #KEYS ~= 3 or since == nil or since < 0 then
  return redis.error_reply('ERR cache_changes: expects 3 keys and a version >= 0')
end
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local out = { current }
if current <= since then return out end
local names = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf')
-- HMGET in chunks: unpack() of a very long list overflows Lua's C stack.
for first = 1, #names, 1000 do
  local chunk = {}
  for i = first, math.min(first + 999, #names) do chunk[#chunk + 1] = names[i] end
  local values = redis.call('HMGET', KEYS[3], unpack(chunk))
  for i, name in ipairs(chunk) do
    out[#out + 1] = name
    out[#out + 1] = values[i]
  end
end
return out
