--[[ cache_release: take pods out of the ledger (unreserve / forget / delete / expire).

Modes (ARGV[2]):
  forget  assumed pods only, and only when ARGV[3] is "" or equals the record's token
  delete  assumed or bound pods (the pod object was deleted)
  expire  assumed pods whose assume deadline <= ARGV[1]; each one whose queue info still
          says w="assumed" with the same uid is requeued: into backoffQ for the backoff
          duration of its attempts (info.w="backoff"), or into activeQ when that duration
          is 0 (info.w="active", and a wake token is pushed). Deliveries (info.d) stay
          counted, as for an expired lease: a pod that keeps killing binders gets
          dead-lettered by queue_pop.
Released pods give back their requests and host ports; the node's generation and the
generations of its topology domains go up by one per pod. A node that was removed
(live != "1") and has no pod left is deleted. A pod without a record is skipped (expire
also drops it from cache:assumed, should it linger there).

KEYS[1]  hash   cache:pods: ns/name -> record JSON
KEYS[2]  zset   cache:assumed: ns/name -> assume deadline (ms)
KEYS[3]  hash   cache:domgen: "<topologyKey>=<value>" -> generation
KEYS[4]  hash   cache:aapods: ns/name -> node
KEYS[5]  set    cache:nodes: node names
KEYS[6]  hash   queue info: ns/name -> JSON
KEYS[7]  zset   queue backoff: ns/name -> backoff expiry (ms)
KEYS[8]  zset   queue active: "<ts:013d>|ns/name" -> -priority
KEYS[9]  list   queue wake tokens
KEYS[10+3(i-1)], KEYS[11+3(i-1)], KEYS[12+3(i-1)] for node i of ARGV[7]:
         hash cache:node:<name>, hash cache:ports:<name>, set cache:nodepods:<name>
KEYS[n-3] hash  store meta of pods: ns/name -> "<rv>|<node>|<bound_at>|<uid>" (expire mode: a
                pod the store already has bound to the record's node is confirmed, not released:
                its binder died between the store's bind and the ledger's confirm)
KEYS[n-2] hash  cache:usage: node -> "<gen>|<host ports>|<res>=<amount>,..." (change feed)
KEYS[n-1] zset  cache:feed: node -> ledger version of its last change (change feed)
KEYS[n]   string cache:feedver: ledger version counter
ARGV[1]  integer  now (ms since epoch)
ARGV[2]  string   mode: forget | delete | expire
ARGV[3]  string   token required by forget ("" = any)
ARGV[4]  integer  initial backoff (ms)
ARGV[5]  integer  maximum backoff (ms)
ARGV[6]  integer  longest the wake list may grow
ARGV[7]  JSON     array of the node names of the key triples
ARGV[8..] string  pod keys ns/name
Returns {"OK", released pod keys...}, or {"MOVED", pod key} (nothing written) when a pod's
record names a node not among ARGV[7]; the caller re-reads the record and retries.
]]

--!include feed


local function fail(msg)
  return redis.error_reply('ERR cache_release: ' .. msg)
end

--!include numbers
--!include storemeta

-- ---------------------------------------------------------------- validate all input
local now, mode, token = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local initial, maximum, wake_cap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if not is_count(now) or not is_count(initial) or not is_count(maximum)
    or not is_count(wake_cap) or wake_cap < 1 then
  return fail('now, backoff durations and wake cap must be non-negative integers')
end
if mode ~= 'forget' and mode ~= 'delete' and mode ~= 'expire' then
  return fail('unknown mode ' .. tostring(mode))
end
local ok, nodes = pcall(cjson.decode, ARGV[7])
if not ok or type(nodes) ~= 'table' then return fail('node names must be a JSON array') end
if #KEYS ~= 13 + 3 * #nodes then return fail('expected ' .. (13 + 3 * #nodes) .. ' keys') end
local index = {}
for i, n in ipairs(nodes) do
  if type(n) ~= 'string' or n == '' then return fail('node names must be non-empty strings') end
  index[n] = i
end

-- ---------------------------------------------------------------- read and decide
local state = {}
local function node_state(i)
  local st = state[i]
  if st then return st end
  local base = 9 + 3 * (i - 1)
  st = { name = nodes[i], node_key = KEYS[base + 1], ports_key = KEYS[base + 2],
         pods_key = KEYS[base + 3], live = false, doms = {}, dreq = {}, padd = {},
         gone = {}, exists = false }
  local flat = redis.call('HGETALL', st.node_key)
  st.exists = #flat > 0
  for j = 1, #flat, 2 do
    local f, v = flat[j], flat[j + 1]
    if f == 'live' then
      st.live = (v == '1')
    elseif string.sub(f, 1, 5) == 'topo:' then
      st.doms[#st.doms + 1] = string.sub(f, 6) .. '=' .. v
    end
  end
  state[i] = st
  return st
end

local released, seen, orphans, bound = {}, {}, {}, {}

local function bound_in_store(key, node)
  local raw = redis.call('HGET', KEYS[#KEYS - 3], key)
  if not raw then return false end
  local rv, meta_node = meta_parse(raw)
  return rv ~= nil and meta_node == node
end
for a = 8, #ARGV do
  local key = ARGV[a]
  local raw = (not seen[key]) and redis.call('HGET', KEYS[1], key)
  if raw == false and not seen[key] and mode == 'expire' then orphans[#orphans + 1] = key end
  seen[key] = true
  if raw then
    local good, rec = pcall(cjson.decode, raw)
    if not good or type(rec) ~= 'table' or type(rec.req) ~= 'table' then
      return fail('unreadable record of ' .. key)
    end
    local i = index[rec.node]
    if not i then return { 'MOVED', key } end
    local deadline = tonumber(redis.call('ZSCORE', KEYS[2], key))
    local take
    if mode == 'delete' then
      take = true
    elseif mode == 'forget' then
      take = deadline ~= nil and (token == '' or rec.token == token)
    else
      take = deadline ~= nil and deadline <= now
      if take and bound_in_store(key, rec.node) then
        take = false
        bound[#bound + 1] = key
      end
    end
    if take then
      local entry = { key = key, rec = rec, st = node_state(i) }
      if mode == 'expire' then
        local info_raw = redis.call('HGET', KEYS[6], key)
        local good_info, info = pcall(cjson.decode, info_raw or '')
        if info_raw and good_info and type(info) == 'table' and info.w == 'assumed'
            and (info.uid == nil or info.uid == '' or info.uid == rec.uid) then
          entry.info = info
        end
      end
      released[#released + 1] = entry
    end
  end
end

-- kube's calculateBackoffDuration: initial, doubled per attempt after the first, capped
local function backoff_ms(attempts)
  local d = initial
  for _ = 2, attempts do
    if d > maximum - d then return maximum end
    d = d + d
  end
  return d
end

-- ---------------------------------------------------------------- write
for _, key in ipairs(orphans) do redis.call('ZREM', KEYS[2], key) end
for _, key in ipairs(bound) do
  redis.call('ZREM', KEYS[2], key)
  redis.call('HDEL', KEYS[6], key)
end
local dominc = {}
local out = { 'OK' }
for _, e in ipairs(released) do
  local st = e.st
  for res, amt in pairs(e.rec.req) do st.dreq[res] = (st.dreq[res] or 0) + amt end
  if type(e.rec.ports) == 'string' then
    for item in string.gmatch(e.rec.ports, '[^,]+') do
      local pp = string.match(item, '^([^|]+|[^|]+)|')
      if pp then
        st.padd[pp] = (st.padd[pp] or 0) + 1
        st.padd[item] = (st.padd[item] or 0) + 1
      end
    end
  end
  st.gone[#st.gone + 1] = e.key
  for _, dom in ipairs(st.doms) do dominc[dom] = (dominc[dom] or 0) + 1 end
  redis.call('HDEL', KEYS[1], e.key)
  redis.call('ZREM', KEYS[2], e.key)
  redis.call('HDEL', KEYS[4], e.key)
  local info = e.info
  if info then
    local attempts = tonumber(info.a) or 0
    local wait = backoff_ms(attempts)
    info.ts = now
    if wait > 0 then
      info.w, info.bo, info.m = 'backoff', now + wait, ''
      redis.call('ZADD', KEYS[7], int(now + wait), e.key)
    else
      local member = string.format('%013d|%s', now, e.key)
      info.w, info.bo, info.m = 'active', 0, member
      redis.call('ZADD', KEYS[8], int(-(tonumber(info.p) or 0)), member)
      redis.call('RPUSH', KEYS[9], '1')
      redis.call('LTRIM', KEYS[9], -wake_cap, -1)
    end
    redis.call('HSET', KEYS[6], e.key, cjson.encode(info))
  end
  out[#out + 1] = e.key
end

local touched = {}
for _, st in pairs(state) do
  if #st.gone > 0 then
    touched[#touched + 1] = { name = st.name, node_key = st.node_key, ports_key = st.ports_key }
    if st.exists then
      for res, amt in pairs(st.dreq) do
        if amt ~= 0 then redis.call('HINCRBY', st.node_key, 'req:' .. res, int(-amt)) end
      end
      redis.call('HINCRBY', st.node_key, 'gen', #st.gone)
    end
    for field, n in pairs(st.padd) do
      if redis.call('HINCRBY', st.ports_key, field, -n) <= 0 then
        redis.call('HDEL', st.ports_key, field)
      end
    end
    redis.call('SREM', st.pods_key, unpack(st.gone))
    if not st.live and redis.call('SCARD', st.pods_key) == 0 then
      redis.call('DEL', st.node_key, st.ports_key, st.pods_key)
      redis.call('SREM', KEYS[5], st.name)
    end
  end
end
for dom, n in pairs(dominc) do redis.call('HINCRBY', KEYS[3], dom, n) end
bump_feed(touched)
return out
