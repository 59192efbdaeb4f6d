--[[ cache_add_bound: record a pod that is already bound to a node (informer sync).

Bound pods are facts: they are added without a fit check. A node the ledger does not know
yet is created as a ghost (live = "0", no allocatable) until cache_node_set sees it.
A fact only while the store still says so: the pod must be in the store with the record's
uid and bound to that node, else nothing is written ("gone"). Callers decide from events
or listings that may be older than the store (a worker handling a binding while another
already handled the pod's deletion; a resync listing a pod deleted since), and a record
added after its pod's deletion was handled would stay in the ledger for good.
Idempotent: a record with the same uid on the same node is left as it is (an assumed one
becomes bound, as in cache_confirm). A record of another uid or on another node is not
touched: the caller deletes it (cache_release delete) and calls again.

KEYS[1]  hash   cache:pods: ns/name -> ledger record (lib/ledger_record.lua)
KEYS[2]  zset   cache:assumed: ns/name -> assume deadline (ms)
KEYS[3]  hash   cache:domgen: "<topologyKey>=<value>" -> generation
KEYS[4]  hash   cache:aagen: "<topologyKey>=<value>" -> anti-affinity generation
KEYS[5]  hash   cache:aapods: ns/name -> node
KEYS[6]  set    cache:nodes: node names
KEYS[7]  hash   queue info: ns/name -> queue record (lib/queue_record.lua)
KEYS[8]  set    cache:topokeys: topology keys whose domains keep a generation
KEYS[9]  hash   cache:node:<node> (its usage, lib/ledger_record.lua, in cache:usage)
KEYS[10] hash   cache:ports:<node>
KEYS[11] set    cache:nodepods:<node>
KEYS[12] hash   store meta of pods: ns/name -> "<rv>|<node>|<bound_at>|<uid>"
KEYS[n-3] string cache:genfloor, KEYS[n-2] hash cache:usage, KEYS[n-1] stream cache:feedlog,
KEYS[n] string cache:feedver
ARGV[1]  string pod key ns/name
ARGV[2]  string node name
ARGV[3]  string the ledger record (lib/ledger_record.lua), its node = ARGV[2]
Returns "added", "confirmed" (was assumed there), "present" (already bound there),
"conflict" (another record holds the name; nothing written) or "gone" (the store does not
have this pod bound to this node; nothing written).
]]

--!include numbers
--!include queue_record
--!include ledger_record
--!include storemeta

local function fail(msg)
  return redis.error_reply('ERR cache_add_bound: ' .. msg)
end

if #KEYS ~= 16 or #ARGV ~= 3 then return fail('expects 16 keys and 3 arguments') end
local key, node = ARGV[1], ARGV[2]
if key == '' or node == '' then return fail('pod key and node must be non-empty') end
local rec = led_decode(ARGV[3])
if not rec or rec.node ~= node then return fail('malformed record') end
local req = parse_requests(rec.req)
if not req then return fail('bad request') end
local ports, msg = parse_ports(rec.ports)
if not ports then return fail(msg) end

local meta = redis.call('HGET', KEYS[12], key)
if not meta then return 'gone' end
local meta_rv, meta_node, _, meta_uid = meta_parse(meta)
if meta_rv == nil or meta_node ~= node or meta_uid ~= rec.uid then return 'gone' end

local held = led_decode(redis.call('HGET', KEYS[1], key))
if held then
  if held.uid == rec.uid and held.node == node then
    if not redis.call('ZSCORE', KEYS[2], key) then return 'present' end
    redis.call('ZREM', KEYS[2], key)
    if rec_is_assumed(rec_decode(redis.call('HGET', KEYS[7], key)), rec.uid) then
      redis.call('HDEL', KEYS[7], key)
    end
    return 'confirmed'
  end
  return 'conflict'
end

local watched = watched_keys(KEYS[8])
local flat = redis.call('HGETALL', KEYS[9])
local topo, doms, aa_doms = {}, {}, {}
for j = 1, #flat, 2 do
  local f, v = flat[j], flat[j + 1]
  if string.sub(f, 1, 5) == 'topo:' then
    local tk = string.sub(f, 6)
    topo[tk] = v
    if watched[tk] then doms[#doms + 1] = tk .. '=' .. v end
  end
end
for tk in string.gmatch(rec.ak, '[^,]+') do
  if topo[tk] then aa_doms[#aa_doms + 1] = tk .. '=' .. topo[tk] end
end
local gen, ports_in_use, node_req = node_usage(redis.call('HGET', KEYS[#KEYS - 2], node),
  KEYS[9], KEYS[10], true)

-- write
if #flat == 0 then redis.call('HSET', KEYS[9], 'live', '0') end
redis.call('SADD', KEYS[6], node)
for res, amt in pairs(req) do
  if amt > 0 then node_req[res] = (node_req[res] or 0) + amt end
end
for _, p in ipairs(ports) do
  redis.call('HINCRBY', KEYS[10], p.pp, 1)
  redis.call('HINCRBY', KEYS[10], p.item, 1)
end
if #ports > 0 then ports_in_use = redis.call('HLEN', KEYS[10]) end
redis.call('SADD', KEYS[11], key)
redis.call('HSET', KEYS[1], key, ARGV[3])
for _, dom in ipairs(doms) do redis.call('HINCRBY', KEYS[3], dom, 1) end
for _, dom in ipairs(aa_doms) do redis.call('HINCRBY', KEYS[4], dom, 1) end
if rec.ak ~= '' then redis.call('HSET', KEYS[5], key, node) end
bump_feed({ { name = node, usage = usage_record(gen + 1, ports_in_use, node_req) } })
return 'added'
