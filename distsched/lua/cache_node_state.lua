--[[ cache_node_state: read the ledger's view of some nodes, atomically (no writes).

KEYS[1]  hash   cache:domgen: "<topologyKey>=<value>" -> generation
KEYS[2]  hash   cache:aagen: "<topologyKey>=<value>" -> anti-affinity generation
KEYS[3+3(i-1)], KEYS[4+3(i-1)], KEYS[5+3(i-1)] for node i:
         hash cache:node:<name>, hash cache:ports:<name>, set cache:nodepods:<name>
No ARGV.
Returns one entry per node: {node hash as a flat field/value list, ports hash flat,
pod keys, domains ("<topologyKey>=<value>"), their generations, their anti-affinity
generations} (generations as strings, "0" when absent).
]]

if #KEYS < 2 or (#KEYS - 2) % 3 ~= 0 then
  return redis.error_reply('ERR cache_node_state: expects 2 + 3 per node keys')
end
local out = {}
for base = 3, #KEYS, 3 do
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
  out[#out + 1] = { flat, redis.call('HGETALL', KEYS[base + 1]),
                    redis.call('SMEMBERS', KEYS[base + 2]), doms, gens, aagens }
end
return out
