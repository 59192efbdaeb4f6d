--[[ cache_reserve: reserve a batch of scheduling decisions against the ledger, in order.

Each decision is checked against the ledger as left by the earlier decisions of the same
batch: fencing (the pod is in inflight and info.e is the decision's lease epoch), resource
fit, host ports, the topology-domain generations the worker saw, and the anti-affinity
generation of the node's domains. All reads happen first and all writes at the end, so an
input error or a failed check never leaves a partial write. At most 1000 decisions per call
(the bulk reads and writes unpack one argument per pod). Needs ZMSCORE (Redis >= 6.2).

KEYS[1]  zset   queue inflight: ns/name -> lease deadline (ms)
KEYS[2]  hash   queue info: ns/name -> JSON (fields uid, e, w, ...)
KEYS[3]  hash   cache:pods: ns/name -> record JSON
KEYS[4]  zset   cache:assumed: ns/name -> assume deadline (ms)
KEYS[5]  hash   cache:domgen: "<topologyKey>=<value>" -> generation
KEYS[6]  hash   cache:aagen: "<topologyKey>=<value>" -> anti-affinity generation
KEYS[7]  hash   cache:aapods: ns/name -> node, pods carrying required anti-affinity terms
KEYS[8+3(i-1)], KEYS[9+3(i-1)], KEYS[10+3(i-1)] for node i of ARGV[2]:
         hash cache:node:<name>, hash cache:ports:<name>, set cache:nodepods:<name>
KEYS[n-2] hash  cache:usage: node -> "<gen>|<host ports>|<res>=<amount>,..." (change feed)
KEYS[n-1] zset  cache:feed: node -> ledger version of its last change (change feed)
KEYS[n]   string cache:feedver: ledger version counter
ARGV[1]  integer  assume deadline (ms since epoch) given to every reserved pod
ARGV[2]  JSON     array of node names, in the order of the key triples
ARGV[3]  JSON     array of checks, one per decision:
                  [pod_key, uid, epoch, node_index (1-based into ARGV[2]),
                   {domain: expected generation}, expected anti-affinity generation sum]
ARGV[3+d] JSON    record of decision d, stored verbatim in cache:pods on success:
                  {"node", "uid", "req": {resource: amount}, "ports": "proto|port|ip,...",
                   "token", "ak": "topologyKey,..."}
Returns an array with one entry per decision: {"R", token} reserved, {"X", reason}
rejected, {"S", reason} stale (fencing). An invalid input returns an error, nothing written.
]]

--!include feed


local function fail(msg)
  return redis.error_reply('ERR cache_reserve: ' .. msg)
end

--!include numbers

local PROTOCOLS = { TCP = true, UDP = true, SCTP = true }

-- "proto|port|ip,..." -> list of {proto=, port=, ip=}, or nil and a message
local function parse_ports(s)
  local out = {}
  if s == '' then return out end
  for item in string.gmatch(s, '[^,]+') do
    local proto, port, ip = string.match(item, '^([^|]+)|(%d+)|([^|]+)$')
    port = tonumber(port)
    if not proto or not PROTOCOLS[proto] or not port or port < 1 or port > 65535 then
      return nil, 'bad host port ' .. item
    end
    out[#out + 1] = { proto = proto, port = port, ip = ip }
  end
  return out
end

local function split_commas(s)
  local out = {}
  for item in string.gmatch(s, '[^,]+') do out[#out + 1] = item end
  return out
end

-- ---------------------------------------------------------------- validate all input
local deadline = tonumber(ARGV[1])
if not is_count(deadline) then return fail('deadline must be a non-negative integer') end
local ok, nodes = pcall(cjson.decode, ARGV[2])
if not ok or type(nodes) ~= 'table' then return fail('node names must be a JSON array') end
if #KEYS ~= 10 + 3 * #nodes then return fail('expected ' .. (10 + 3 * #nodes) .. ' keys') end
for _, n in ipairs(nodes) do
  if type(n) ~= 'string' or n == '' then return fail('node names must be non-empty strings') end
end
local checks
ok, checks = pcall(cjson.decode, ARGV[3])
if not ok or type(checks) ~= 'table' then return fail('checks must be a JSON array') end
if #checks ~= #ARGV - 3 then return fail('one record per check expected') end
if #checks < 1 or #checks > 1000 then return fail('1 to 1000 decisions per call') end

local records, ports_of, ak_of = {}, {}, {}
for d, c in ipairs(checks) do
  if type(c) ~= 'table' or type(c[1]) ~= 'string' or c[1] == '' or type(c[2]) ~= 'string'
      or not is_count(c[3]) or not is_count(c[4]) or c[4] < 1 or c[4] > #nodes
      or type(c[5]) ~= 'table' or not is_count(c[6]) then
    return fail('malformed check #' .. d)
  end
  for dom, gen in pairs(c[5]) do
    if type(dom) ~= 'string' or not string.find(dom, '=', 1, true) or not is_count(gen) then
      return fail('malformed domain check in #' .. d)
    end
  end
  local rec
  ok, rec = pcall(cjson.decode, ARGV[3 + d])
  if not ok or type(rec) ~= 'table' or rec.node ~= nodes[c[4]] or rec.uid ~= c[2]
      or type(rec.req) ~= 'table' or type(rec.ports) ~= 'string' or type(rec.ak) ~= 'string'
      or type(rec.token) ~= 'string' then
    return fail('record #' .. d .. ' does not match its check')
  end
  for res, amt in pairs(rec.req) do
    if type(res) ~= 'string' or res == '' or not is_count(amt) then
      return fail('bad request in record #' .. d)
    end
  end
  local ports, msg = parse_ports(rec.ports)
  if not ports then return fail(msg) end
  records[d], ports_of[d], ak_of[d] = rec, ports, split_commas(rec.ak)
end

-- ---------------------------------------------------------------- ledger state
-- Read in bulk (a few calls per batch, not per decision): the pods' leases, infos and
-- existing records, every node of the batch and the anti-affinity generations of their
-- domains. Domain generations for checks are read on demand (few pods carry checks).
local pod_keys = {}
for d, c in ipairs(checks) do pod_keys[d] = c[1] end
local leases = redis.call('ZMSCORE', KEYS[1], unpack(pod_keys))
local infos = redis.call('HMGET', KEYS[2], unpack(pod_keys))
local held = redis.call('HMGET', KEYS[3], unpack(pod_keys))

local state, all_doms, seen_dom = {}, {}, {}
for i, name in ipairs(nodes) do
  local base = 7 + 3 * (i - 1)
  local st = { name = name, node_key = KEYS[base + 1], ports_key = KEYS[base + 2],
               pods_key = KEYS[base + 3], live = false, gen = 0, alloc = {}, req = {},
               topo = {}, doms = {}, dreq = {}, dgen = 0, pcache = {}, padd = {}, newpods = {} }
  local flat = redis.call('HGETALL', st.node_key)
  for j = 1, #flat, 2 do
    local f, v = flat[j], flat[j + 1]
    local colon = string.find(f, ':', 1, true)
    if f == 'live' then
      st.live = (v == '1')
    elseif f == 'gen' then
      st.gen = tonumber(v)
    elseif colon then
      local kind, res = string.sub(f, 1, colon - 1), string.sub(f, colon + 1)
      if kind == 'alloc' then
        st.alloc[res] = tonumber(v)
      elseif kind == 'req' then
        st.req[res] = tonumber(v)
      elseif kind == 'topo' then
        local dom = res .. '=' .. v
        st.topo[res] = v
        st.doms[#st.doms + 1] = dom
        if not seen_dom[dom] then
          seen_dom[dom] = true
          all_doms[#all_doms + 1] = dom
        end
      end
    end
  end
  state[i] = st
end

local aagen, aainc, domgen, dominc = {}, {}, {}, {}
if #all_doms > 0 then
  local gens = redis.call('HMGET', KEYS[6], unpack(all_doms))
  for j, dom in ipairs(all_doms) do aagen[dom] = tonumber(gens[j] or '0') end
end

local function domain_gen(dom)
  local g = domgen[dom]
  if g == nil then
    g = tonumber(redis.call('HGET', KEYS[5], dom) or '0')
    domgen[dom] = g
  end
  return g + (dominc[dom] or 0)
end

-- holders of a port field ("proto|port|ip" or "proto|port" for all ips) incl. this batch
local function holders(st, field)
  local v = st.pcache[field]
  if v == nil then
    v = tonumber(redis.call('HGET', st.ports_key, field) or '0')
    st.pcache[field] = v
  end
  return v + (st.padd[field] or 0)
end

local function port_conflict(st, p)
  local pp = p.proto .. '|' .. p.port
  if p.ip == '0.0.0.0' then return holders(st, pp) > 0 end
  return holders(st, pp .. '|' .. p.ip) > 0 or holders(st, pp .. '|0.0.0.0') > 0
end

-- ---------------------------------------------------------------- check in order
local results, reserved, taken = {}, {}, {}

local function check(d, c, rec)
  local key = c[1]
  if taken[key] or not leases[d] then return 'S', 'pod is not inflight' end
  if not infos[d] then return 'S', 'pod has no queue info' end
  local good, info = pcall(cjson.decode, infos[d])
  if not good or type(info) ~= 'table' then return 'S', 'queue info is unreadable' end
  if tonumber(info.e) ~= c[3] then return 'S', 'lease epoch ' .. c[3] .. ' is not current' end
  if info.uid and info.uid ~= '' and info.uid ~= c[2] then return 'S', 'pod uid changed' end
  if held[d] then
    local ok_held, old = pcall(cjson.decode, held[d])
    if ok_held and type(old) == 'table' and old.uid == c[2] then
      return 'S', 'pod is already assumed or bound'
    end
    return 'X', 'a previous pod with this name still holds a reservation'
  end

  local st = state[c[4]]
  if not st.live then return 'X', 'node(s) not found' end
  local short = {}
  for res, amt in pairs(rec.req) do
    if amt > 0 and (st.req[res] or 0) + (st.dreq[res] or 0) + amt > (st.alloc[res] or 0) then
      short[#short + 1] = 'Insufficient ' .. res
    end
  end
  if #short > 0 then
    table.sort(short)
    return 'X', table.concat(short, ', ')
  end
  for _, p in ipairs(ports_of[d]) do
    if port_conflict(st, p) then
      return 'X', "node(s) didn't have free ports for the requested pod ports"
    end
  end
  for dom, want in pairs(c[5]) do
    local have = domain_gen(dom)
    if have ~= want then
      return 'X', 'topology domain ' .. dom .. ' changed (generation ' .. have .. ', saw ' .. want .. ')'
    end
  end
  local aa = 0
  for _, dom in ipairs(st.doms) do aa = aa + aagen[dom] + (aainc[dom] or 0) end
  if aa ~= c[6] then
    return 'X', 'anti-affinity of pods in the node\'s domains changed (generation ' .. aa
      .. ', saw ' .. c[6] .. ')'
  end

  -- fits: apply to the batch overlay
  for res, amt in pairs(rec.req) do st.dreq[res] = (st.dreq[res] or 0) + amt end
  for _, p in ipairs(ports_of[d]) do
    local pp = p.proto .. '|' .. p.port
    st.padd[pp] = (st.padd[pp] or 0) + 1
    st.padd[pp .. '|' .. p.ip] = (st.padd[pp .. '|' .. p.ip] or 0) + 1
  end
  st.dgen = st.dgen + 1
  st.newpods[#st.newpods + 1] = key
  for _, dom in ipairs(st.doms) do dominc[dom] = (dominc[dom] or 0) + 1 end
  for _, tk in ipairs(ak_of[d]) do
    local v = st.topo[tk]
    if v then
      local dom = tk .. '=' .. v
      aainc[dom] = (aainc[dom] or 0) + 1
    end
  end
  taken[key] = true
  info.w = 'assumed'
  reserved[#reserved + 1] = { key = key, info = info, d = d, node = st.name, aa = #ak_of[d] > 0 }
  return 'R', rec.token
end

for d, c in ipairs(checks) do
  local kind, detail = check(d, c, records[d])
  results[d] = { kind, detail }
end
if #reserved == 0 then return results end

-- ---------------------------------------------------------------- write
-- Absolute values computed from what was read above; one call per node and per key.
local touched = {}
for _, st in ipairs(state) do
  if st.dgen > 0 then
    touched[#touched + 1] = { name = st.name, node_key = st.node_key, ports_key = st.ports_key }
    local fields = { 'gen', int(st.gen + st.dgen) }
    for res, amt in pairs(st.dreq) do
      fields[#fields + 1] = 'req:' .. res
      fields[#fields + 1] = int((st.req[res] or 0) + amt)
    end
    redis.call('HSET', st.node_key, unpack(fields))
    for field, n in pairs(st.padd) do redis.call('HINCRBY', st.ports_key, field, n) end
    redis.call('SADD', st.pods_key, unpack(st.newpods))
  end
end

local function add_to_hash(key, inc, known)
  local doms, fields = {}, {}
  for dom in pairs(inc) do doms[#doms + 1] = dom end
  if #doms == 0 then return end
  local current = known and {} or redis.call('HMGET', key, unpack(doms))
  for j, dom in ipairs(doms) do
    local base = known and known[dom] or tonumber(current[j] or '0')
    fields[#fields + 1] = dom
    fields[#fields + 1] = int(base + inc[dom])
  end
  redis.call('HSET', key, unpack(fields))
end
add_to_hash(KEYS[5], dominc, nil)
add_to_hash(KEYS[6], aainc, aagen)

local pods, deadlines, keys_, new_infos, aa_pods = {}, {}, {}, {}, {}
for _, r in ipairs(reserved) do
  pods[#pods + 1] = r.key
  pods[#pods + 1] = ARGV[3 + r.d]
  deadlines[#deadlines + 1] = ARGV[1]
  deadlines[#deadlines + 1] = r.key
  keys_[#keys_ + 1] = r.key
  new_infos[#new_infos + 1] = r.key
  new_infos[#new_infos + 1] = cjson.encode(r.info)
  if r.aa then
    aa_pods[#aa_pods + 1] = r.key
    aa_pods[#aa_pods + 1] = r.node
  end
end
redis.call('HSET', KEYS[3], unpack(pods))
redis.call('ZADD', KEYS[4], unpack(deadlines))
redis.call('ZREM', KEYS[1], unpack(keys_))
redis.call('HSET', KEYS[2], unpack(new_infos))
if #aa_pods > 0 then redis.call('HSET', KEYS[7], unpack(aa_pods)) end
bump_feed(touched)
return results
