--[[ cache_release: take pods out of the ledger (unreserve / forget / delete / expire).

Modes (ARGV[2]):
  forget  assumed pods only, and only when ARGV[3] is "" or equals the record's token
  delete  assumed or bound pods (the pod object was deleted); only the record of uid
          ARGV[3] when it is not "" (a pod re-created under the name keeps its own)
  delete_each  as delete, for pods deleted together (a preemptor's victims, say: one
          call where each would pay the node's read and the feed's write): the pod
          keys come in pairs of key and uid ("" = any), ARGV[3] unused
  orphan  assumed or bound pods the store no longer has (no pod under the name, or one of
          another uid): the consistency sweep's repair of a record whose pod's deletion
          was missed; a record whose pod the store has is never taken
  expire  assumed pods whose assume deadline <= ARGV[1]; each one whose queue record still
          says assumed with the same uid is requeued through the queue's hand-off
          (lib/queue_record.lua rec_requeue_released: backoffQ for the backoff of its
          attempts, activeQ when that is 0; deliveries stay counted, so a pod that keeps
          killing binders gets dead-lettered by queue_pop)
Released pods give back their requests and host ports; the node's generation (in its
usage record, lib/ledger_record.lua) goes up by one per pod, and so does the generation
of each of its watched topology domains (cache:topokeys). A node that was removed
(live != "1") and has no pod left is deleted. A pod without a record is skipped (expire
also drops it from cache:assumed, should it linger there).

KEYS[1]  hash   cache:pods: ns/name -> ledger record (lib/ledger_record.lua)
KEYS[2]  zset   cache:assumed: ns/name -> assume deadline (ms)
KEYS[3]  hash   cache:domgen: "<topologyKey>=<value>" -> generation
KEYS[4]  hash   cache:aapods: ns/name -> node
KEYS[5]  set    cache:nodes: node names
KEYS[6]  hash   queue info: ns/name -> queue record (lib/queue_record.lua)
KEYS[7]  zset   queue backoff: ns/name -> backoff expiry (ms)
KEYS[8]  zset   queue active: "<ts:013d>|ns/name" -> -priority
KEYS[9]  list   queue wake tokens
KEYS[10] set    cache:topokeys: topology keys whose domains keep a generation
KEYS[11+3(i-1)], KEYS[12+3(i-1)], KEYS[13+3(i-1)] for node i of ARGV[7..]:
         hash cache:node:<name>, hash cache:ports:<name>, set cache:nodepods:<name>
KEYS[n-4] hash  store meta of pods: ns/name -> "<rv>|<node>|<bound_at>|<uid>" (expire mode: a
                pod the store already has bound to the record's node is confirmed, not released:
                its binder died between the store's bind and the ledger's confirm; orphan
                mode: the pods the store has)
KEYS[n-3] string cache:genfloor, KEYS[n-2] hash cache:usage, KEYS[n-1] stream cache:feedlog,
KEYS[n] string cache:feedver
ARGV[1]  integer  now (ms since epoch)
ARGV[2]  string   mode: forget | delete | orphan | expire
ARGV[3]  string   token required by forget, uid required by delete ("" = any)
ARGV[4]  integer  initial backoff (ms)
ARGV[5]  integer  maximum backoff (ms)
ARGV[6]  integer  longest the wake list may grow
ARGV[7]  integer  N, the number of nodes; ARGV[8 .. 7+N] their names, in key-triple order
ARGV[8+N ..] string  pod keys ns/name (delete_each: ns/name, uid, ns/name, uid, ...)
Returns {"OK", released pod keys...}, or {"MOVED", pod key} (nothing written) when a pod's
record names a node not among the given ones; the caller re-reads the record and retries.
]]

--!include numbers
--!include queue_record
--!include ledger_record
--!include storemeta

local function fail(msg)
  return redis.error_reply('ERR cache_release: ' .. msg)
end

-- ---------------------------------------------------------------- validate all input
local now, mode, token = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local initial, maximum, wake_cap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local n_nodes = tonumber(ARGV[7])
if not is_count(now) or not is_count(initial) or not is_count(maximum)
    or not is_count(wake_cap) or wake_cap < 1 or not is_count(n_nodes) then
  return fail('now, backoff durations, wake cap and node count must be non-negative integers')
end
if mode ~= 'forget' and mode ~= 'delete' and mode ~= 'delete_each' and mode ~= 'orphan'
    and mode ~= 'expire' then
  return fail('unknown mode ' .. tostring(mode))
end
if #KEYS ~= 15 + 3 * n_nodes then return fail('expected ' .. (15 + 3 * n_nodes) .. ' keys') end
local nodes, index = {}, {}
for i = 1, n_nodes do
  local n = ARGV[7 + i]
  if not n or n == '' then return fail('node names must be non-empty strings') end
  nodes[i] = n
  index[n] = i
end

-- ---------------------------------------------------------------- read and decide
local state = {}
local function node_state(i)
  local st = state[i]
  if st then return st end
  local base = 10 + 3 * (i - 1)
  st = { name = nodes[i], node_key = KEYS[base + 1], ports_key = KEYS[base + 2],
         pods_key = KEYS[base + 3], live = false, gen = 0, req = {}, doms = {}, dreq = {},
         padd = {}, gone = {}, exists = false }
  local flat = redis.call('HGETALL', st.node_key)
  st.exists = #flat > 0
  for j = 1, #flat, 2 do
    local f, v = flat[j], flat[j + 1]
    if f == 'live' then
      st.live = (v == '1')
    elseif string.sub(f, 1, 5) == 'topo:' then
      st.doms[#st.doms + 1] = { string.sub(f, 6), string.sub(f, 6) .. '=' .. v }
    end
  end
  st.gen, st.ports, st.req = node_usage(redis.call('HGET', KEYS[#KEYS - 2], st.name),
    st.node_key, st.ports_key, true)
  state[i] = st
  return st
end

-- Whether the store has this incarnation of the pod (any node, bound or not).
local function in_store(key, uid)
  local raw = redis.call('HGET', KEYS[#KEYS - 4], key)
  if not raw then return false end
  local rv, _, _, meta_uid = meta_parse(raw)
  return rv ~= nil and meta_uid == uid
end

-- The node the store has the pod bound to ('' when unbound or unknown).
local function bound_node_in_store(key)
  local raw = redis.call('HGET', KEYS[#KEYS - 4], key)
  if not raw then return '' end
  local rv, meta_node = meta_parse(raw)
  if rv == nil then return '' end
  return meta_node
end

local pods = {}  -- {key, uid}: the uid a delete requires
if mode == 'delete_each' then
  if (#ARGV - 7 - n_nodes) % 2 ~= 0 then
    return fail('delete_each takes pod keys and uids in pairs')
  end
  for a = 8 + n_nodes, #ARGV, 2 do pods[#pods + 1] = { ARGV[a], ARGV[a + 1] } end
else
  for a = 8 + n_nodes, #ARGV do pods[#pods + 1] = { ARGV[a], token } end
end

local released, seen, orphans, bound = {}, {}, {}, {}
for _, pod in ipairs(pods) do
  local key = pod[1]
  local raw = (not seen[key]) and redis.call('HGET', KEYS[1], key)
  if raw == false and not seen[key] and mode == 'expire' then orphans[#orphans + 1] = key end
  seen[key] = true
  if raw then
    local rec = led_decode(raw)
    local req = rec and parse_requests(rec.req)
    local ports = rec and parse_ports(rec.ports)
    if not rec or not req or not ports then return fail('unreadable record of ' .. key) end
    local i = index[rec.node]
    if not i then return { 'MOVED', key } end
    local deadline = tonumber(redis.call('ZSCORE', KEYS[2], key))
    local take
    if mode == 'delete' or mode == 'delete_each' then
      take = pod[2] == '' or rec.uid == pod[2]
    elseif mode == 'orphan' then
      take = not in_store(key, rec.uid)
    elseif mode == 'forget' then
      take = deadline ~= nil and (token == '' or rec.token == token)
    else
      take = deadline ~= nil and deadline <= now
      if take and bound_node_in_store(key) == rec.node then
        take = false
        bound[#bound + 1] = { key = key, uid = rec.uid }
      end
    end
    if take then
      local entry = { key = key, rec = rec, req = req, ports = ports, st = node_state(i) }
      if mode == 'expire' then
        local q = rec_decode(redis.call('HGET', KEYS[6], key))
        if rec_is_assumed(q, rec.uid) then entry.queued = q end
      end
      released[#released + 1] = entry
    end
  end
end

-- ---------------------------------------------------------------- write
local watched = watched_keys(KEYS[10])
for _, key in ipairs(orphans) do redis.call('ZREM', KEYS[2], key) end
for _, b in ipairs(bound) do
  -- The store has it bound: the queue forgets it as the bind would have (rec_is_assumed).
  redis.call('ZREM', KEYS[2], b.key)
  if rec_is_assumed(rec_decode(redis.call('HGET', KEYS[6], b.key)), b.uid) then
    redis.call('HDEL', KEYS[6], b.key)
  end
end
local dominc = {}
local out = { 'OK' }
local activated = 0
for _, e in ipairs(released) do
  local st = e.st
  for res, amt in pairs(e.req) do st.dreq[res] = (st.dreq[res] or 0) + amt end
  for _, p in ipairs(e.ports) do
    st.padd[p.pp] = (st.padd[p.pp] or 0) + 1
    st.padd[p.item] = (st.padd[p.item] or 0) + 1
  end
  st.gone[#st.gone + 1] = e.key
  for _, dom in ipairs(st.doms) do
    if watched[dom[1]] then dominc[dom[2]] = (dominc[dom[2]] or 0) + 1 end
  end
  redis.call('HDEL', KEYS[1], e.key)
  redis.call('ZREM', KEYS[2], e.key)
  redis.call('HDEL', KEYS[4], e.key)
  if e.queued then
    if rec_requeue_released(e.key, e.queued, now, initial, maximum, KEYS[8], KEYS[7]) then
      activated = activated + 1
    end
    redis.call('HSET', KEYS[6], e.key, rec_encode(e.queued))
  end
  out[#out + 1] = e.key
end
wake(KEYS[9], activated, wake_cap)

local touched = {}
for _, st in pairs(state) do
  if #st.gone > 0 then
    local gen, ports, req = st.gen, st.ports, st.req
    if st.exists then
      gen = gen + #st.gone
      for res, amt in pairs(st.dreq) do
        if amt ~= 0 then req[res] = (req[res] or 0) - amt end
      end
    end
    if next(st.padd) then
      for field, n in pairs(st.padd) do
        if redis.call('HINCRBY', st.ports_key, field, -n) <= 0 then
          redis.call('HDEL', st.ports_key, field)
        end
      end
      ports = redis.call('HLEN', st.ports_key)
    end
    redis.call('SREM', st.pods_key, unpack(st.gone))
    local deleted = nil
    if not st.live and redis.call('SCARD', st.pods_key) == 0 then
      redis.call('DEL', st.node_key, st.ports_key, st.pods_key)
      redis.call('SREM', KEYS[5], st.name)
      ports, req, deleted = 0, {}, gen
    end
    touched[#touched + 1] = { name = st.name, usage = usage_record(gen, ports, req),
                              deleted = deleted }
  end
end
for dom, n in pairs(dominc) do redis.call('HINCRBY', KEYS[3], dom, n) end
bump_feed(touched)
return out
