--[[ cache_node_state: read the ledger's view of some nodes, atomically (no writes).

KEYS[1]  hash   cache:domgen: "<topologyKey>=<value>" -> generation
KEYS[2]  hash   cache:aagen: "<topologyKey>=<value>" -> anti-affinity generation
KEYS[3]  hash   cache:usage: node -> usage record (lib/ledger_record.lua)
KEYS[4+3(i-1)], KEYS[5+3(i-1)], KEYS[6+3(i-1)] for node i:
         hash cache:node:<name>, hash cache:ports:<name>, set cache:nodepods:<name>
ARGV[i]  string the name of node i
Returns one entry per node: {node hash as a flat field/value list, ports hash flat,
pod keys, domains ("<topologyKey>=<value>"), their generations, their anti-affinity
generations, its usage record} (generations as strings, "0" when absent; the usage record
as lib/ledger_record.lua writes it, "0|0|" for a node the ledger never had).
]]

--!include ledger_record

if #KEYS < 3 or (#KEYS - 3) % 3 ~= 0 or #ARGV ~= (#KEYS - 3) / 3 then
  return redis.error_reply('ERR cache_node_state: expects 3 + 3 per node keys, a name per node')
end
local out = {}
for base = 4, #KEYS, 3 do
  local name = ARGV[(base - 1) / 3]
  local flat = redis.call('HGETALL', KEYS[base])
  local doms = {}
  for j = 1, #flat, 2 do
    if string.sub(flat[j], 1, 5) == 'topo:' then
      doms[#doms + 1] = string.sub(flat[j], 6) .. '=' .. flat[j + 1]
    end
  end
  local gens, aagens = {}, {}
  if #doms > 0 then
    gens = redis.call('HMGET', KEYS[1], unpack(doms))
    aagens = redis.call('HMGET', KEYS[2], unpack(doms))
    for j = 1, #doms do
      gens[j] = gens[j] or '0'
      aagens[j] = aagens[j] or '0'
    end
  end
  local gen, ports, req = node_usage(redis.call('HGET', KEYS[3], name), KEYS[base],
    KEYS[base + 1])
  out[#out + 1] = { flat, redis.call('HGETALL', KEYS[base + 1]),
                    redis.call('SMEMBERS', KEYS[base + 2]), doms, gens, aagens,
                    usage_record(gen, ports, req) }
end
return out
