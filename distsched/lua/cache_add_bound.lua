--[[ cache_add_bound: record a pod that is already bound to a node (informer sync).

Bound pods are facts: they are added without a fit check. A node the ledger does not know
yet is created as a ghost (live = "0", no allocatable) until cache_node_set sees it.
Idempotent: a record with the same uid on the same node is left as it is (an assumed one
becomes bound, as in cache_confirm). A record of another uid or on another node is not
touched: the caller deletes it (cache_release delete) and calls again.

KEYS[1]  hash   cache:pods: ns/name -> record JSON
KEYS[2]  zset   cache:assumed: ns/name -> assume deadline (ms)
KEYS[3]  hash   cache:domgen: "<topologyKey>=<value>" -> generation
KEYS[4]  hash   cache:aagen: "<topologyKey>=<value>" -> anti-affinity generation
KEYS[5]  hash   cache:aapods: ns/name -> node
KEYS[6]  set    cache:nodes: node names
KEYS[7]  hash   queue info: ns/name -> JSON
KEYS[8]  hash   cache:node:<node>
KEYS[9]  hash   cache:ports:<node>
KEYS[10] set    cache:nodepods:<node>
KEYS[n-2] hash  cache:usage: node -> "<gen>|<host ports>|<res>=<amount>,..." (change feed)
KEYS[n-1] zset  cache:feed: node -> ledger version of its last change (change feed)
KEYS[n]   string cache:feedver: ledger version counter
ARGV[1]  string pod key ns/name
ARGV[2]  string node name
ARGV[3]  JSON   record {"node", "uid", "req": {resource: amount}, "ports": "proto|port|ip,...",
                "token", "ak": "topologyKey,..."}
Returns "added", "confirmed" (was assumed there), "present" (already bound there) or
"conflict" (another record holds the name; nothing written).
]]

--!include feed


local function fail(msg)
  return redis.error_reply('ERR cache_add_bound: ' .. msg)
end

--!include numbers

if #KEYS ~= 13 or #ARGV ~= 3 then return fail('expects 13 keys and 3 arguments') end
local key, node = ARGV[1], ARGV[2]
if key == '' or node == '' then return fail('pod key and node must be non-empty') end
local ok, rec = pcall(cjson.decode, ARGV[3])
if not ok or type(rec) ~= 'table' or rec.node ~= node or type(rec.uid) ~= 'string'
    or type(rec.req) ~= 'table' or type(rec.ports) ~= 'string' or type(rec.ak) ~= 'string' then
  return fail('malformed record')
end
for res, amt in pairs(rec.req) do
  if type(res) ~= 'string' or res == '' or not is_count(amt) then return fail('bad request') end
end
local ports = {}
for item in string.gmatch(rec.ports, '[^,]+') do
  local pp = string.match(item, '^([A-Z]+|%d+)|[^|]+$')
  if not pp then return fail('bad host port ' .. item) end
  ports[#ports + 1] = { pp, item }
end

local held = redis.call('HGET', KEYS[1], key)
if held then
  local good, old = pcall(cjson.decode, held)
  if good and type(old) == 'table' and old.uid == rec.uid and old.node == node then
    if not redis.call('ZSCORE', KEYS[2], key) then return 'present' end
    local info_raw = redis.call('HGET', KEYS[7], key)
    local good_info, info = pcall(cjson.decode, info_raw or '')
    redis.call('ZREM', KEYS[2], key)
    if info_raw and good_info and type(info) == 'table' and info.w == 'assumed'
        and (info.uid == nil or info.uid == '' or info.uid == rec.uid) then
      redis.call('HDEL', KEYS[7], key)
    end
    return 'confirmed'
  end
  return 'conflict'
end

local doms, aa_doms = {}, {}
local topo = {}
local flat = redis.call('HGETALL', KEYS[8])
for j = 1, #flat, 2 do
  if string.sub(flat[j], 1, 5) == 'topo:' then
    local tk = string.sub(flat[j], 6)
    topo[tk] = flat[j + 1]
    doms[#doms + 1] = tk .. '=' .. flat[j + 1]
  end
end
for tk in string.gmatch(rec.ak, '[^,]+') do
  if topo[tk] then aa_doms[#aa_doms + 1] = tk .. '=' .. topo[tk] end
end

-- write
if #flat == 0 then redis.call('HSET', KEYS[8], 'live', '0', 'gen', '0') end
redis.call('SADD', KEYS[6], node)
for res, amt in pairs(rec.req) do
  if amt > 0 then redis.call('HINCRBY', KEYS[8], 'req:' .. res, string.format('%d', amt)) end
end
redis.call('HINCRBY', KEYS[8], 'gen', 1)
for _, p in ipairs(ports) do
  redis.call('HINCRBY', KEYS[9], p[1], 1)
  redis.call('HINCRBY', KEYS[9], p[2], 1)
end
redis.call('SADD', KEYS[10], key)
redis.call('HSET', KEYS[1], key, ARGV[3])
for _, dom in ipairs(doms) do redis.call('HINCRBY', KEYS[3], dom, 1) end
for _, dom in ipairs(aa_doms) do redis.call('HINCRBY', KEYS[4], dom, 1) end
if rec.ak ~= '' then redis.call('HSET', KEYS[5], key, node) end
bump_feed({ { name = node, node_key = KEYS[8], ports_key = KEYS[9] } })
return 'added'
