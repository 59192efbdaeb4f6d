--[[ cache_changes: the ledger's change feed since a version, and the current generations of
some topology domains, read in one step (read only).

A worker that decides pods whose placement depends on other pods reads the generations of
the multi-node domains it will check here, before it syncs the pod lists they cover:
generations first, data second, so that every reservation a generation counts is in the
data (see distsched.cache.ledger).

KEYS[1]  string cache:feedver: ledger version counter
KEYS[2]  zset   cache:feed: node -> ledger version of its last change
KEYS[3]  hash   cache:usage: node -> "<gen>|<host ports in use, -1 unknown>|<res>=<amount>,..."
KEYS[4]  hash   cache:domgen: "<topologyKey>=<value>" -> generation
KEYS[5]  hash   cache:aagen: "<topologyKey>=<value>" -> anti-affinity generation
ARGV[1]  integer  the version the caller has seen (0 for everything)
ARGV[2..] string  domains "<topologyKey>=<value>" whose generations to return
Returns {current version, {node 1, usage 1, node 2, usage 2, ...}, {domain generations},
{anti-affinity generations}}: every node stamped after ARGV[1] (a usage is false for a
node deleted since), and one generation per ARGV[2..] domain (false when none).
]]

local since = tonumber(ARGV[1])
if #KEYS ~= 5 or since == nil or since < 0 then
  return redis.error_reply('ERR cache_changes: expects 5 keys and a version >= 0')
end
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local changes = {}
if current > since then
  local names = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf')
  -- HMGET in chunks: unpack() of a very long list overflows Lua's C stack.
  for first = 1, #names, 1000 do
    local chunk = {}
    for i = first, math.min(first + 999, #names) do chunk[#chunk + 1] = names[i] end
    local values = redis.call('HMGET', KEYS[3], unpack(chunk))
    for i, name in ipairs(chunk) do
      changes[#changes + 1] = name
      changes[#changes + 1] = values[i]
    end
  end
end
local gens, aagens = {}, {}
for first = 2, #ARGV, 1000 do
  local chunk = {}
  for i = first, math.min(first + 999, #ARGV) do chunk[#chunk + 1] = ARGV[i] end
  local g = redis.call('HMGET', KEYS[4], unpack(chunk))
  local a = redis.call('HMGET', KEYS[5], unpack(chunk))
  for i = 1, #chunk do
    gens[#gens + 1] = g[i]
    aagens[#aagens + 1] = a[i]
  end
end
return { current, changes, gens, aagens }
