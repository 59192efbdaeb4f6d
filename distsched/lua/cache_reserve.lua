--[[ cache_reserve: reserve a batch of scheduling decisions against the ledger, in order.

Each decision is checked against the ledger as left by the earlier decisions of the same
batch: fencing (the pod's queue record says inflight under the decision's lease epoch and
uid), resource fit, host ports, the topology-domain generations the worker saw, and the
anti-affinity generation of the node's domains. Every read and check happens before the
first write, so bad input or a failed check never leaves a partial write. A reserved pod
gets a ledger record and an assume deadline, and its queue record says assumed (the
queue's hand-off, lib/queue_record.lua). A node's usage lives in its usage record
(lib/ledger_record.lua), read and written for all the batch's nodes in one command each;
a live node's allocatable comes from cache:capacity, read for the whole batch in one
command too (a node not there is read from its hash: not live, or a ledger written before
cache:capacity existed), and a node costs one SADD, plus its ports hash when a decision
has host ports. At most 1000 decisions per call (bulk
commands unpack one argument per pod).

Domain generations (cache:domgen) are kept only for the topology keys in cache:topokeys,
the keys some constrained pod watches; a worker registers a key before it reads the
generations it will send (see distsched.cache.ledger).

KEYS[1]  zset   queue inflight: ns/name -> lease deadline (ms)
KEYS[2]  hash   queue info: ns/name -> queue record (lib/queue_record.lua)
KEYS[3]  hash   cache:pods: ns/name -> ledger record (lib/ledger_record.lua)
KEYS[4]  zset   cache:assumed: ns/name -> assume deadline (ms)
KEYS[5]  hash   cache:domgen: "<topologyKey>=<value>" -> generation
KEYS[6]  hash   cache:aagen: "<topologyKey>=<value>" -> anti-affinity generation
KEYS[7]  hash   cache:aapods: ns/name -> node, pods carrying required anti-affinity terms
KEYS[8]  set    cache:topokeys: topology keys whose domains keep a generation
KEYS[9]  hash   cache:capacity: live node -> its allocatable "<res>=<amount>,..."
KEYS[10+3(i-1)], KEYS[11+3(i-1)], KEYS[12+3(i-1)] for node i of ARGV[4 .. 3+N]:
         hash cache:node:<name> (live, alloc:<res>, topo:<key>), hash cache:ports:<name>,
         set cache:nodepods:<name>
KEYS[n-3] string cache:genfloor, KEYS[n-2] hash cache:usage, KEYS[n-1] stream cache:feedlog,
KEYS[n] string cache:feedver
ARGV[1]  int     assume deadline (ms since epoch) given to every reserved pod
ARGV[2]  str     all or nothing: "0" none; or
                 "g:<n1>,<n2>,..." the decisions in consecutive groups of those sizes (they
                 add up to the number of decisions). A group of more than one (a gang) is
                 reserved only if every one of its decisions passes; otherwise each of its
                 decisions that passed is {"X", "gang member <key>: <why the first refused
                 member failed>"}, and the later decisions are checked as if the group
                 had not been there
ARGV[3]  int     N, the number of nodes; ARGV[4 .. 3+N] their names, in key-triple order
then per decision, in order:
         pod key, uid, epoch (the lease epoch; becomes the token), node index (1-based),
         requests "<res>=<amount>,..." (the pseudo-resources "+cpu" / "+memory", scoring's
         non-zero extra, add up like the others but are not checked against allocatable),
         host ports "<proto>|<port>|<ip>,...",
         anti-affinity topology keys "k1,k2", expected anti-affinity generation sum,
         seen pods + 1 (the node's pod count the worker's view had, before this batch's
         own decisions; 0: no check): refused if another worker added pods to the node
         since, so that concurrent workers do not all pick the node that looked emptiest,
         C = number of domain checks, then C pairs (domain "<key>=<value>", generation)
Returns a flat list, two entries per decision (kind, detail): "R", token reserved; "X",
reason rejected; "S", reason stale (fencing); "I", reason invalid: a request beyond 2^53-1
(numbers here are doubles), refused alone, the batch goes on. Any other invalid input
returns an error and writes nothing.
]]

--!include numbers
--!include queue_record
--!include ledger_record
--!include bulk

-- The hot loops read these as locals: a global is a table lookup at every use.
local tonumber, pairs, ipairs, unpack = tonumber, pairs, ipairs, unpack
local ARGV, KEYS = ARGV, KEYS
local call, find, sub = redis.call, string.find, string.sub

local function fail(msg)
  return redis.error_reply('ERR cache_reserve: ' .. msg)
end

-- ---------------------------------------------------------------- validate all input
local deadline = tonumber(ARGV[1])
local all_or_nothing = ARGV[2]
local n_nodes = tonumber(ARGV[3])
local group_sizes = nil
if sub(all_or_nothing or '', 1, 2) == 'g:' then
  group_sizes = {}
  for n in string.gmatch(sub(all_or_nothing, 3), '[^,]+') do
    local size = tonumber(n)
    if not is_count(size) or size < 1 then return fail('bad group size ' .. n) end
    group_sizes[#group_sizes + 1] = size
  end
elseif all_or_nothing ~= '0' then
  return fail('all_or_nothing must be 0 or g:<sizes>')
end
if not is_count(deadline) then return fail('deadline must be a non-negative integer') end
if not is_count(n_nodes) or n_nodes < 1 then return fail('node count must be positive') end
if #KEYS ~= 13 + 3 * n_nodes then return fail('expected ' .. (13 + 3 * n_nodes) .. ' keys') end
local nodes = {}
for i = 1, n_nodes do
  local name = ARGV[3 + i]
  if not name or name == '' or find(name, ' ', 1, true) then
    return fail('node names must be non-empty, without spaces')
  end
  nodes[i] = name
end

local decisions = {}
local parsed_req, parsed_ports, parsed_aks, req_invalid = {}, {}, {}, {}
local parsed_limits = {}  -- req_text -> {res, amount, ...}: the requests checked against allocatable
local parsed_items = {}  -- req_text -> {res, amount, ...}: every request (a flat list walks faster)
local limit_fields, limit_res, limited_seen = { 'live' }, {}, {}  -- what a node hash must say
local NONE = {}  -- shared by every decision without domain checks; never written
local any_aks = false
local a, n_args, d = 4 + n_nodes, #ARGV, 0
while a <= n_args do
  d = d + 1
  local key, uid, epoch, ni = ARGV[a], ARGV[a + 1], ARGV[a + 2], number_of(ARGV[a + 3])
  -- The lease epoch stays text, canonical decimal: the token as it is, and the fencing
  -- check compares it with the queue record's as text (no strtod, no string.format per
  -- decision). Workers send it so (15 digits at most: a count); another spelling of a
  -- count is rewritten once here.
  if not (epoch and #epoch <= 15 and find(epoch, '^[1-9]%d*$')) then
    local n = tonumber(epoch)
    if not is_count(n) then return fail('malformed decision #' .. d) end
    epoch = string.format('%d', n)
  end
  local req_text, ports_text, ak = ARGV[a + 4], ARGV[a + 5], ARGV[a + 6]
  -- (most decisions send 0 for both: no parse for those)
  local aa = ARGV[a + 7] == '0' and 0 or tonumber(ARGV[a + 7])
  local seen = number_of(ARGV[a + 8])
  local n_checks = ARGV[a + 9] == '0' and 0 or tonumber(ARGV[a + 9])
  if not key or key == '' or find(key, ' ', 1, true) or not uid
      or not is_count(ni) or ni < 1 or ni > n_nodes or not req_text or not ports_text
      or not ak or find(ak, ' ', 1, true) or not is_count(aa) or not is_count(seen)
      or not is_count(n_checks) then
    return fail('malformed decision #' .. d)
  end
  -- Pods of one template send the same strings: parse each distinct one once.
  local req = parsed_req[req_text]
  if req == nil then
    req = parse_requests(req_text)
    if not req or find(req_text, ' ', 1, true) then return fail('bad requests in #' .. d) end
    parsed_req[req_text] = req
    req_invalid[req_text] = false
    local limited, items = {}, {}
    for res, amt in pairs(req) do
      items[#items + 1] = res
      items[#items + 1] = amt
      if not is_count(amt) then
        req_invalid[req_text] = 'request ' .. res .. ' exceeds the largest amount distsched can account (2^53-1)'
      end
      -- '+cpu' / '+memory' (43 = '+'): scoring's non-zero extra, summed but never a limit
      if amt > 0 and string.byte(res, 1) ~= 43 then
        limited[#limited + 1] = res
        limited[#limited + 1] = amt
        if not limited_seen[res] then
          limited_seen[res] = true
          limit_res[#limit_res + 1] = res
          limit_fields[#limit_fields + 1] = 'alloc:' .. res
        end
      end
    end
    parsed_limits[req_text] = limited
    parsed_items[req_text] = items
  end
  local ports = parsed_ports[ports_text]
  if ports == nil then
    local msg
    ports, msg = parse_ports(ports_text)
    if not ports then return fail(msg) end
    parsed_ports[ports_text] = ports
  end
  local checks = NONE
  if n_checks > 0 then checks = {} end
  for c = 1, n_checks do
    local dom, gen = ARGV[a + 8 + 2 * c], tonumber(ARGV[a + 9 + 2 * c])
    if not dom or not find(dom, '=', 1, true) or not is_count(gen) then
      return fail('malformed domain check in #' .. d)
    end
    checks[dom] = gen
  end
  local aks = parsed_aks[ak]
  if aks == nil then
    aks = {}
    for tk in string.gmatch(ak, '[^,]+') do aks[#aks + 1] = tk end
    parsed_aks[ak] = aks
  end
  if #aks > 0 then any_aks = true end
  decisions[d] = { key = key, uid = uid, epoch = epoch, ni = ni, req_text = req_text,
                   limits = parsed_limits[req_text], items = parsed_items[req_text],
                   ports = ports, ports_text = ports_text, ak = ak, aks = aks, aa = aa,
                   seen = seen, checks = checks, invalid = req_invalid[req_text] }
  a = a + 10 + 2 * n_checks
end
if #decisions < 1 or #decisions > 1000 then return fail('1 to 1000 decisions per call') end
if not group_sizes then
  group_sizes = {}
  for d = 1, #decisions do group_sizes[d] = 1 end
end
local grouped = 0
for g = 1, #group_sizes do grouped = grouped + group_sizes[g] end
if grouped ~= #decisions then return fail('group sizes add up to ' .. grouped .. ', not ' .. #decisions) end

-- ---------------------------------------------------------------- ledger state
local pod_keys = {}
for d = 1, #decisions do pod_keys[d] = decisions[d].key end
local records = call('HMGET', KEYS[2], unpack(pod_keys))
local held = call('HMGET', KEYS[3], unpack(pod_keys))
local watched = watched_keys(KEYS[8])

-- Each node's usage (generation, host-port fields in use, requested amounts) comes from
-- its usage record, all in one command; its hash says whether it is live and its
-- allocatable: just the fields this batch checks, unless the batch needs the node's
-- domains, when the whole hash is read (a field name is split at its ':' once:
-- field_kind "alloc", "topo", or the whole name; field_res what follows the ':').
local usages = call('HMGET', KEYS[#KEYS - 2], unpack(nodes))
local field_kind, field_res = {}, {}
-- A live node's allocatable, for a batch that reads no domains (one command for all nodes;
-- one parse per distinct text, the table shared read-only by the nodes that have it).
local capacities, parsed_capacity = NONE, {}

-- A node's domain strings ("<key>=<value>") are made only when something reads them: the
-- anti-affinity sum (some pod with required anti-affinity was ever placed, or this batch
-- places one) or a watched key's generation. A plain batch skips them (and the tables
-- that only ports or domains use are made on first use: a node costs few allocations).
local any_aa = call('EXISTS', KEYS[6]) == 1
local aa_doms = any_aa or any_aks
local need_topo = aa_doms or next(watched) ~= nil
local state, all_doms, seen_dom = {}, {}, {}
if not need_topo then capacities = call('HMGET', KEYS[9], unpack(nodes)) end
-- A node's st.items is the text of its amounts with this batch's reservations so far,
-- st.req their parse (shared by the nodes in the same state; st.pods0: its pod count
-- before them); st.newpod, the first pod this batch put there, and st.newpods, all
-- of them once there is a second (most nodes of a batch get one: no table for them).
for i = 1, n_nodes do
  local name = nodes[i]
  local base = 9 + 3 * (i - 1)
  local node_key = KEYS[base + 1]
  -- (16 fields at most: a table's hash part is sized to a power of two)
  local st = { name = name, base = base, live = false, gen = 0, ports0 = 0, alloc = NONE,
               items = '', req = NONE, topo = NONE, doms = NONE, watched_doms = NONE, dgen = 0,
               pods0 = 0, newpod = false, newpods = NONE }
  local capacity = capacities[i]
  if capacity then
    local alloc = parsed_capacity[capacity]
    if alloc == nil then
      alloc = parse_requests(capacity)
      if not alloc then return fail('bad capacity of node ' .. name) end
      parsed_capacity[capacity] = alloc
    end
    st.live, st.alloc = true, alloc
  elseif not need_topo then
    local alloc = {}
    st.alloc = alloc
    local vals = call('HMGET', node_key, unpack(limit_fields))
    st.live = (vals[1] == '1')
    for k, res in ipairs(limit_res) do
      local v = vals[k + 1]
      if v then alloc[res] = tonumber(v) end
    end
  else
    local alloc = {}
    st.alloc = alloc
    local flat = call('HGETALL', node_key)
    for j = 1, #flat, 2 do
      local f, v = flat[j], flat[j + 1]
      local kind = field_kind[f]
      if kind == nil then
        local colon = find(f, ':', 1, true)
        if colon then
          kind, field_res[f] = sub(f, 1, colon - 1), sub(f, colon + 1)
        else
          kind, field_res[f] = f, ''
        end
        field_kind[f] = kind
      end
      local res = field_res[f]
      if kind == 'alloc' then
        alloc[res] = tonumber(v)
      elseif kind == 'topo' then
        if st.topo == NONE then st.topo = {} end
        st.topo[res] = v
        if aa_doms or watched[res] then
          local dom = res .. '=' .. v
          if aa_doms then
            if st.doms == NONE then st.doms = {} end
            st.doms[#st.doms + 1] = dom
            if any_aa and not seen_dom[dom] then
              seen_dom[dom] = true
              all_doms[#all_doms + 1] = dom
            end
          end
          if watched[res] then
            if st.watched_doms == NONE then st.watched_doms = {} end
            st.watched_doms[#st.watched_doms + 1] = dom
          end
        end
      elseif res == '' and kind == 'live' then
        st.live = (v == '1')
      end
    end
  end
  st.gen, st.ports0, st.items = node_usage_items(usages[i], node_key, KEYS[base + 2])
  st.req = usage_items(st.items)
  st.pods0 = st.req['pods'] or 0
  state[i] = st
end

-- Anti-affinity generations of every domain of the batch's nodes (all zero, unread, while
-- no pod with required anti-affinity was ever placed).
local aagen, aainc, domgen, dominc = {}, {}, {}, {}
if any_aa and #all_doms > 0 then
  local gens = call('HMGET', KEYS[6], unpack(all_doms))
  for j, dom in ipairs(all_doms) do aagen[dom] = tonumber(gens[j] or '0') end
end

local function domain_gen(dom)
  local g = domgen[dom]
  if g == nil then
    g = tonumber(call('HGET', KEYS[5], dom) or '0')
    domgen[dom] = g
  end
  return g + (dominc[dom] or 0)
end

-- holders of a port field ("proto|port|ip" or "proto|port" for all ips) incl. this batch
local function holders(st, field)
  if not st.pcache then st.pcache, st.padd = {}, {} end
  local v = st.pcache[field]
  if v == nil then
    v = tonumber(call('HGET', KEYS[st.base + 2], field) or '0')
    st.pcache[field] = v
  end
  return v + (st.padd[field] or 0)
end

local function port_conflict(st, p)
  if p.ip == '0.0.0.0' then return holders(st, p.pp) > 0 end
  return holders(st, p.pp .. '|' .. p.ip) > 0 or holders(st, p.pp .. '|0.0.0.0') > 0
end

-- A node's amounts' text after one more decision's requests: before -> req_text -> after.
-- Nodes that hold the same pods share the text, so a batch computes each step once.
local items_after = {}
local function add_requests(before, req_text, items)
  local by_req = items_after[before]
  if by_req == nil then
    by_req = {}
    items_after[before] = by_req
  end
  local after = by_req[req_text]
  if after == nil then
    local req = {}
    for res, amt in pairs(usage_items(before)) do req[res] = amt end
    for j = 1, #items, 2 do
      local res = items[j]
      req[res] = (req[res] or 0) + items[j + 1]
    end
    after = usage_items_text(req)
    by_req[req_text] = after
    if parsed_usage_items[after] == nil then parsed_usage_items[after] = req end
  end
  return after
end

-- ---------------------------------------------------------------- check in order
-- results: kind and detail of decision d at 2d - 1 and 2d
local results, reserved, taken = {}, {}, {}

local function check(d, dec)
  local key = dec.key
  if dec.invalid then return 'I', dec.invalid end
  if taken[key] then return 'S', 'pod is not inflight' end
  local assumed, why = rec_assume_text(records[d], dec.epoch, dec.uid)
  if not assumed then return 'S', why end
  local old = led_decode(held[d])
  if old then
    if old.uid == dec.uid then return 'S', 'pod is already assumed or bound' end
    return 'X', 'a previous pod with this name still holds a reservation'
  end

  local st = state[dec.ni]
  if not st.live then return 'X', 'node(s) not found' end
  local limits, req, alloc = dec.limits, st.req, st.alloc
  local short = nil
  for k = 1, #limits, 2 do
    local res = limits[k]
    if (req[res] or 0) + limits[k + 1] > (alloc[res] or 0) then
      short = short or {}
      short[#short + 1] = 'Insufficient ' .. res
    end
  end
  if short then
    table.sort(short)
    return 'X', table.concat(short, ', ')
  end
  local ports = dec.ports
  for j = 1, #ports do
    if port_conflict(st, ports[j]) then
      return 'X', "node(s) didn't have free ports for the requested pod ports"
    end
  end
  if dec.checks ~= NONE then
    for dom, want in pairs(dec.checks) do
      local have = domain_gen(dom)
      if have ~= want then
        return 'X', 'topology domain ' .. dom .. ' changed (generation ' .. have .. ', saw ' .. want .. ')'
      end
    end
  end
  local aa = 0
  if any_aa then
    for _, dom in ipairs(st.doms) do aa = aa + aagen[dom] + (aainc[dom] or 0) end
  elseif any_aks then
    for _, dom in ipairs(st.doms) do aa = aa + (aainc[dom] or 0) end
  end
  if aa ~= dec.aa then
    return 'X', 'anti-affinity of pods in the node\'s domains changed (generation ' .. aa
      .. ', saw ' .. dec.aa .. ')'
  end
  if dec.seen > 0 and st.pods0 > dec.seen - 1 then
    return 'X', 'node usage changed (' .. int(st.pods0) .. ' pods, saw '
      .. int(dec.seen - 1) .. ')'
  end

  -- fits: apply to the batch overlay
  local before = st.items
  st.items = add_requests(before, dec.req_text, dec.items)
  st.req = usage_items(st.items)
  if #ports > 0 then
    if not st.padd then st.pcache, st.padd = {}, {} end
    for _, p in ipairs(ports) do
      st.padd[p.pp] = (st.padd[p.pp] or 0) + 1
      st.padd[p.pp .. '|' .. p.ip] = (st.padd[p.pp .. '|' .. p.ip] or 0) + 1
    end
  end
  st.dgen = st.dgen + 1
  if st.dgen == 1 then st.newpod = key
  elseif st.dgen == 2 then st.newpods = { st.newpod, key }
  else st.newpods[st.dgen] = key end
  local watched_doms = st.watched_doms
  for j = 1, #watched_doms do
    local dom = watched_doms[j]
    dominc[dom] = (dominc[dom] or 0) + 1
  end
  local aks = dec.aks
  for j = 1, #aks do
    local tk = aks[j]
    local v = st.topo[tk]
    if v then
      local dom = tk .. '=' .. v
      aainc[dom] = (aainc[dom] or 0) + 1
    end
  end
  taken[key] = true
  reserved[#reserved + 1] = { d = d, key = key, queued = assumed, node = st.name,
                              token = dec.epoch, before = before }
  return 'R', dec.epoch
end

-- Take back what check() applied to the batch overlay for a reserved decision (its group
-- was refused), so that the later decisions see the ledger as if it had not been there.
local function unapply(r)
  local dec = decisions[r.d]
  local st = state[dec.ni]
  st.items = r.before
  st.req = usage_items(r.before)
  for _, p in ipairs(dec.ports) do
    st.padd[p.pp] = st.padd[p.pp] - 1
    st.padd[p.pp .. '|' .. p.ip] = st.padd[p.pp .. '|' .. p.ip] - 1
  end
  st.dgen = st.dgen - 1
  -- undone in reverse order: its own entry is the last
  if st.dgen == 1 then st.newpods = NONE elseif st.dgen > 1 then st.newpods[st.dgen + 1] = nil end
  for _, dom in ipairs(st.watched_doms) do dominc[dom] = dominc[dom] - 1 end
  for _, tk in ipairs(dec.aks) do
    local v = st.topo[tk]
    if v then
      local dom = tk .. '=' .. v
      aainc[dom] = aainc[dom] - 1
    end
  end
  taken[dec.key] = nil
end

local first = 1
for g = 1, #group_sizes do
  local size = group_sizes[g]
  local last = first + size - 1
  local before = #reserved
  local refusal = nil
  for d = first, last do
    local kind, detail = check(d, decisions[d])
    results[2 * d - 1], results[2 * d] = kind, detail
    if kind ~= 'R' and not refusal then refusal = decisions[d].key .. ': ' .. detail end
  end
  if refusal and size > 1 then
    -- A gang: one member refused, none is reserved (each says why the first one failed).
    for i = #reserved, before + 1, -1 do
      unapply(reserved[i])
      reserved[i] = nil
    end
    for d = first, last do
      if results[2 * d - 1] == 'R' then
        results[2 * d - 1], results[2 * d] = 'X', 'gang member ' .. refusal
      end
    end
  end
  first = last + 1
end
if #reserved == 0 then return results end

-- ---------------------------------------------------------------- write
local touched = {}
for i = 1, n_nodes do
  local st = state[i]
  if st.dgen > 0 then
    local ports_in_use = st.ports0
    if st.padd then
      for field, count in pairs(st.padd) do
        if count ~= 0 then call('HINCRBY', KEYS[st.base + 2], field, count) end
      end
      ports_in_use = call('HLEN', KEYS[st.base + 2])
    end
    if st.dgen == 1 then
      call('SADD', KEYS[st.base + 3], st.newpod)
    else
      call('SADD', KEYS[st.base + 3], unpack(st.newpods))
    end
    touched[#touched + 1] = { name = st.name,
                              usage = usage_text(st.gen + st.dgen, ports_in_use, st.items) }
  end
end

local function add_to_hash(key, inc, known)
  local doms, fields = {}, {}
  for dom in pairs(inc) do doms[#doms + 1] = dom end
  if #doms == 0 then return end
  local current = known and {} or call('HMGET', key, unpack(doms))
  for j, dom in ipairs(doms) do
    local base = known and (known[dom] or 0) or tonumber(current[j] or '0')
    fields[#fields + 1] = dom
    fields[#fields + 1] = int(base + inc[dom])
  end
  call('HSET', key, unpack(fields))
end
add_to_hash(KEYS[5], dominc, nil)
add_to_hash(KEYS[6], aainc, aagen)

local pods, deadlines, keys_, infos, aa_pods = {}, {}, {}, {}, {}
local deadline_text = ARGV[1]
for k = 1, #reserved do
  local r = reserved[k]
  local dec, key = decisions[r.d], r.key
  pods[2 * k - 1] = key
  pods[2 * k] = led_encode(r.node, r.token, dec.req_text, dec.ports_text, dec.ak, dec.uid)
  deadlines[2 * k - 1], deadlines[2 * k] = deadline_text, key
  keys_[k] = key
  infos[2 * k - 1], infos[2 * k] = key, r.queued
  if #dec.aks > 0 then
    aa_pods[#aa_pods + 1] = r.key
    aa_pods[#aa_pods + 1] = r.node
  end
end
call('HSET', KEYS[3], unpack(pods))
zadd_all(KEYS[4], deadlines)
call('ZREM', KEYS[1], unpack(keys_))
call('HSET', KEYS[2], unpack(infos))
if #aa_pods > 0 then call('HSET', KEYS[7], unpack(aa_pods)) end
bump_feed(touched)
return results
