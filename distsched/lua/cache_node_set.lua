--[[ cache_node_set: add or update a node's allocatable and topology domains.

A ghost node (removed, or created by cache_add_bound before its Node was seen) becomes live
again and keeps its requested amounts. The node's generation (in its usage record, see
lib/ledger_record.lua) goes up by one; a node new to the ledger starts above every
generation a deleted node had (cache:genfloor).
When its topology domains change, every old and new domain's generation goes up by one,
and, when the node hosts a pod with required anti-affinity, so does the anti-affinity
generation of each domain the node enters or leaves (that pod moves with the node).

KEYS[1]  set    cache:nodes: node names
KEYS[2]  hash   cache:domgen: "<topologyKey>=<value>" -> generation
KEYS[3]  hash   cache:aagen: "<topologyKey>=<value>" -> anti-affinity generation
KEYS[4]  hash   cache:node:<name>: live, alloc:<res>, topo:<key>
KEYS[5]  set    cache:nodepods:<name>
KEYS[6]  hash   cache:aapods: ns/name -> node, pods carrying required anti-affinity
KEYS[7]  hash   cache:ports:<name>
KEYS[8]  hash   cache:capacity: live node -> its allocatable "<res>=<amount>,..." (sorted),
                the copy of the node hash's alloc fields that cache_reserve reads for a
                whole batch in one command
KEYS[n-3] string cache:genfloor: the highest generation of a deleted node's record
KEYS[n-2] hash  cache:usage: node -> its usage record (lib/ledger_record.lua)
KEYS[n-1] stream cache:feedlog: one entry per ledger version (change feed)
KEYS[n]   string cache:feedver: ledger version counter
ARGV[1]  string node name
ARGV[2]  JSON   allocatable {resource: amount} (cpu millicores, memory bytes, pods, ...)
ARGV[3]  JSON   topology domains {topologyKey: value}
Returns 1 when the node was new or not live, 0 when a live node was updated.
]]

--!include ledger_record


local function fail(msg)
  return redis.error_reply('ERR cache_node_set: ' .. msg)
end

--!include numbers
--!include bulk

if #KEYS ~= 12 or #ARGV ~= 3 or ARGV[1] == '' then
  return fail('expects 12 keys, a node name, allocatable and domains')
end
local ok, alloc = pcall(cjson.decode, ARGV[2])
if not ok or type(alloc) ~= 'table' then return fail('allocatable must be a JSON object') end
for res, amt in pairs(alloc) do
  if type(res) ~= 'string' or res == '' or not is_count(amt) then
    return fail('bad allocatable ' .. tostring(res))
  end
end
local domains
ok, domains = pcall(cjson.decode, ARGV[3])
if not ok or type(domains) ~= 'table' then return fail('domains must be a JSON object') end
for tk, v in pairs(domains) do
  if type(tk) ~= 'string' or tk == '' or string.find(tk, '=', 1, true)
      or type(v) ~= 'string' then
    return fail('bad topology domain ' .. tostring(tk))
  end
end

local flat = redis.call('HGETALL', KEYS[4])
local was_live = false
local old_alloc, old_topo = {}, {}  -- old_alloc: the fields to drop before writing
for j = 1, #flat, 2 do
  local f, v = flat[j], flat[j + 1]
  if f == 'live' then
    was_live = (v == '1')
  elseif string.sub(f, 1, 6) == 'alloc:' or f == 'gen' or string.sub(f, 1, 4) == 'req:' then
    -- (gen and req:<res>: what the usage record holds, kept here by earlier versions)
    old_alloc[#old_alloc + 1] = f
  elseif string.sub(f, 1, 5) == 'topo:' then
    old_topo[string.sub(f, 6)] = v
  end
end

local gen, ports, req = node_usage(redis.call('HGET', KEYS[#KEYS - 2], ARGV[1]), KEYS[4], KEYS[7],
  true)

local changed = {}
for tk, v in pairs(old_topo) do
  if domains[tk] ~= v then changed[#changed + 1] = tk .. '=' .. v end
end
for tk, v in pairs(domains) do
  if old_topo[tk] ~= v then changed[#changed + 1] = tk .. '=' .. v end
end
local hosts_anti_affinity = false
if #changed > 0 then
  for _, key in ipairs(redis.call('SMEMBERS', KEYS[5])) do
    if redis.call('HEXISTS', KEYS[6], key) == 1 then
      hosts_anti_affinity = true
      break
    end
  end
end

-- write
if #old_alloc > 0 then redis.call('HDEL', KEYS[4], unpack(old_alloc)) end
local capacity = {}
for res, amt in pairs(alloc) do
  local text = string.format('%d', amt)
  redis.call('HSET', KEYS[4], 'alloc:' .. res, text)
  capacity[#capacity + 1] = res .. '=' .. text
end
redis.call('HSET', KEYS[4], 'live', '1')
table.sort(capacity)  -- nodes of one shape share one text, parsed once per batch
redis.call('HSET', KEYS[8], ARGV[1], table.concat(capacity, ','))
if #changed > 0 then
  for tk, v in pairs(old_topo) do
    if domains[tk] == nil then redis.call('HDEL', KEYS[4], 'topo:' .. tk) end
    redis.call('HINCRBY', KEYS[2], tk .. '=' .. v, 1)
  end
  for tk, v in pairs(domains) do
    redis.call('HSET', KEYS[4], 'topo:' .. tk, v)
    if old_topo[tk] ~= v then redis.call('HINCRBY', KEYS[2], tk .. '=' .. v, 1) end
  end
  if hosts_anti_affinity then
    for _, dom in ipairs(changed) do redis.call('HINCRBY', KEYS[3], dom, 1) end
  end
end
redis.call('SADD', KEYS[1], ARGV[1])
bump_feed({ { name = ARGV[1], usage = usage_record(gen + 1, ports, req) } })
-- The hashes with a field per node, which a reservation batch reads node by node (a hash
-- without fields is left without: the key is gone again).
hashtable_encoding(KEYS[8])
hashtable_encoding(KEYS[#KEYS - 2])
hashtable_encoding(KEYS[2])
if was_live then return 0 end
return 1
