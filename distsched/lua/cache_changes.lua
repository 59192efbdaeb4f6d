--[[ cache_changes: the ledger's change feed since a version, and the current generations of
some topology domains, read in one step (read only).

A worker that decides pods whose placement depends on other pods reads the generations of
the multi-node domains it will check here, before it syncs the pod lists they cover:
generations first, data second, so that every reservation a generation counts is in the
data (see distsched.cache.ledger).

KEYS[1]  string cache:feedver: ledger version counter
KEYS[2]  stream cache:feedlog: one entry per version, id "<version>-0", node -> usage
KEYS[3]  hash   cache:usage: node -> its usage record (lib/ledger_record.lua) "<gen>|<host
                ports in use, -1 unknown (older releases)>|<res>=<amount>,..."
KEYS[4]  hash   cache:domgen: "<topologyKey>=<value>" -> generation
KEYS[5]  hash   cache:aagen: "<topologyKey>=<value>" -> anti-affinity generation
ARGV[1]  integer  the version the caller has seen (0 for everything)
ARGV[2..] string  domains "<topologyKey>=<value>" whose generations to return
Returns {current version, {node 1, usage 1, node 2, usage 2, ...}, {domain generations},
{anti-affinity generations}}: every node changed after version ARGV[1] with its usage now
(a node may come twice: the later one is current), and one generation per ARGV[2..] domain
(false when none). The changes come from the log's entries after ARGV[1] when it still
holds all of them and they are few; otherwise (ARGV[1] = 0, a caller further behind, a
log trimmed past it or started after it) from cache:usage whole, which names every node
the ledger has (a deleted node's last record, "<gen>|0|", is in the log alone).
]]

local since = tonumber(ARGV[1])
if #KEYS ~= 5 or since == nil or since < 0 then
  return redis.error_reply('ERR cache_changes: expects 5 keys and a version >= 0')
end
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local changes = {}
local READ_MAX = 256  -- versions read from the log; further behind, cache:usage is cheaper
local function everything()
  changes = redis.call('HGETALL', KEYS[3])
end
if current > since then
  if since == 0 or current - since > READ_MAX then
    everything()
  else
    local first_id = string.format('%d-0', since + 1)
    local entries = redis.call('XRANGE', KEYS[2], first_id, '+')
    if #entries ~= current - since or entries[1][1] ~= first_id then
      everything()  -- versions missing from the log: trimmed, or written before it
    else
      for _, entry in ipairs(entries) do
        for _, v in ipairs(entry[2]) do changes[#changes + 1] = v end
      end
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
