-- The ledger's per-pod record (cache:pods, ns/name -> record) and the change feed that every
-- script changing a node's usage keeps (included with "--!include ledger_record"). This
-- library is the record's only reader and writer in Lua; distsched.cache.ledger_types
-- encode_record / decode_record are its Python twins.
--
-- A record is one line of text, fields separated by one space:
--
--   node token req ports ak uid
--
--   node   the node the pod is assumed or bound on
--   token  the reservation token (the lease epoch of the reserving pop; "bound" for a pod
--          recorded bound by cache_add_bound)
--   req    "<resource>=<amount>,..." canonical units (cpu millicores, bytes, pods, units);
--          "+cpu" / "+memory": what scoring's non-zero requests add over cpu / memory
--          (distsched.cache.ledger_types NONZERO_EXTRA), summed per node like the others
--   ports  host ports "<proto>|<port>|<ip>,..." ('' = none)
--   ak     topology keys of the pod's own required anti-affinity terms, "k1,k2" ('' = none)
--   uid    the pod's uid; last, so that it may hold any character
--
-- A pod with a record and an entry in cache:assumed is assumed; without the entry, bound.

local LEDGER_PATTERN = '^(%S+) (%S+) (%S*) (%S*) (%S*) (.*)$'

local function led_encode(node, token, req, ports, ak, uid)
  return node .. ' ' .. token .. ' ' .. req .. ' ' .. ports .. ' ' .. ak .. ' ' .. uid
end

-- {node, token, req (text), ports (text), ak (text), uid}, or nil when not a record.
local function led_decode(text)
  if not text then return nil end
  if string.byte(text, 1) == 123 then  -- '{': JSON, written before this layout
    local ok, j = pcall(cjson.decode, text)
    if not ok or type(j) ~= 'table' or type(j.node) ~= 'string' then return nil end
    local req = {}
    for res, amt in pairs(type(j.req) == 'table' and j.req or {}) do
      req[#req + 1] = res .. '=' .. string.format('%d', amt)
    end
    table.sort(req)
    return { node = j.node, token = tostring(j.token or ''), req = table.concat(req, ','),
             ports = type(j.ports) == 'string' and j.ports or '',
             ak = type(j.ak) == 'string' and j.ak or '', uid = tostring(j.uid or '') }
  end
  local node, token, req, ports, ak, uid = string.match(text, LEDGER_PATTERN)
  if not node then return nil end
  return { node = node, token = token, req = req, ports = ports, ak = ak, uid = uid }
end

-- node, token, uid of a record, without the rest (nil when not a record).
local LEDGER_HOLDER = '^(%S+) (%S+) %S* %S* %S* (.*)$'
local function led_holder(text)
  if not text then return nil end
  if string.byte(text, 1) == 123 then
    local rec = led_decode(text)
    if not rec then return nil end
    return rec.node, rec.token, rec.uid
  end
  return string.match(text, LEDGER_HOLDER)
end

-- "<res>=<amount>,..." -> {res = amount}, or nil when malformed.
local function parse_requests(text)
  local out = {}
  if text == '' then return out end
  for item in string.gmatch(text, '[^,]+') do
    local res, amt = string.match(item, '^([^=]+)=(%d+)$')
    if not res then return nil end
    out[res] = tonumber(amt)
  end
  return out
end

local PROTOCOLS = { TCP = true, UDP = true, SCTP = true }

-- "<proto>|<port>|<ip>,..." -> list of {proto, port, ip, pp = "<proto>|<port>", item}, or
-- nil and a message.
local function parse_ports(text)
  local out = {}
  if text == '' then return out end
  for item in string.gmatch(text, '[^,]+') do
    local proto, port, ip = string.match(item, '^([^|]+)|(%d+)|([^|]+)$')
    port = tonumber(port)
    if not proto or not PROTOCOLS[proto] or not port or port < 1 or port > 65535 then
      return nil, 'bad host port ' .. item
    end
    out[#out + 1] = { proto = proto, port = port, ip = ip, pp = proto .. '|' .. port, item = item }
  end
  return out
end

-- A node's usage record, "<gen>|<host ports in use>|<res>=<amount>,...", in cache:usage
-- (node -> record) is the only place the ledger keeps a node's generation, the number of
-- host-port fields held on it (its cache:ports hash's length) and its requested amounts
-- (absolute; zero amounts left out). Its node hash holds what the Node says (live,
-- allocatable, topology). Every script that changes a node rewrites the record and appends
-- it to the change feed. The last four KEYS of such a script: cache:genfloor, cache:usage,
-- cache:feedlog, cache:feedver. bump_feed bumps the version, stores each touched node's
-- record in cache:usage, and appends the version's entry to cache:feedlog, id
-- "<version>-0", fields node -> record. A worker that saw version v reads the entries
-- after it (cache_changes.lua); one further behind than the log keeps (the last FEED_KEEP
-- versions, or more: trimming is approximate) reads cache:usage whole. One entry per call,
-- not a write per node into a node -> version index, keeps a batch's feed to one command
-- whose cost does not grow with the cluster. A node deleted from the ledger has its last
-- record ("<gen>|0|") in the log and none in cache:usage, and cache:genfloor keeps the
-- highest generation such a record had: a node that comes back under a used name starts
-- above it, so that a generation never names two states of one node.
local FEED_KEEP = 512

local USAGE_PATTERN, USAGE_ITEM_PATTERN = '^(%d+)|(%-?%d+)|(.*)$', '([^,=]+)=(%-?%d+)'

-- The record from its parts: generation, host ports in use, the amounts' text.
local function usage_text(gen, ports_in_use, items_text)
  return string.format('%d|%d|', gen, ports_in_use) .. items_text
end

-- {res = amount} of the text after a record's second '|' (a new table).
local function usage_amounts(items)
  local req = {}
  for res, amt in string.gmatch(items, USAGE_ITEM_PATTERN) do req[res] = tonumber(amt) end
  return req
end

-- gen, host ports in use, {res = amount} of a record; nil when the text is not one.
local function usage_parse(text)
  local gen, ports, items = string.match(text, USAGE_PATTERN)
  if not gen then return nil end
  return tonumber(gen), tonumber(ports), usage_amounts(items)
end

-- A usage record's amounts by the text after its second '|', parsed once per script call
-- (nodes with the same pods share the text): text -> {res = amount}, read-only.
local parsed_usage_items = {}
local function usage_items(text)
  local req = parsed_usage_items[text]
  if req == nil then
    req = usage_amounts(text)
    parsed_usage_items[text] = req
  end
  return req
end

-- The amounts' text of a record: "<res>=<amount>" of the non-zero ones, sorted.
local function usage_items_text(req)
  local items = {}
  for res, amt in pairs(req) do
    if amt ~= 0 then items[#items + 1] = res .. '=' .. string.format('%d', amt) end
  end
  table.sort(items)
  return table.concat(items, ',')
end

local function usage_record(gen, ports_in_use, req)
  return usage_text(gen, ports_in_use, usage_items_text(req))
end

-- gen and {res = amount} from the fields a node hash had before the usage record was the
-- only copy (gen, req:<res>): a deployment upgraded in place, until its nodes are rewritten.
local function usage_from_node_hash(flat)
  local gen, req = 0, {}
  for j = 1, #flat, 2 do
    local f = flat[j]
    if string.sub(f, 1, 4) == 'req:' then
      req[string.sub(f, 5)] = tonumber(flat[j + 1])
    elseif f == 'gen' then
      gen = tonumber(flat[j + 1])
    end
  end
  return gen, req
end

-- The generation floor (cache:genfloor, KEYS[#KEYS - 3] of a script that changes usage).
local function generation_floor()
  return tonumber(redis.call('GET', KEYS[#KEYS - 3]) or '0') or 0
end

-- A node's usage now: gen, host ports in use, {res = amount}. `text` is its record (nil
-- or false when it has none); the node and ports hashes answer for what it cannot say.
-- A node without a record starts from the generation floor (KEYS[#KEYS - 3]) when
-- `from_floor` (the scripts that write one).
local function node_usage(text, node_key, ports_key, from_floor)
  local gen, ports, req
  if text then gen, ports, req = usage_parse(text) end
  if not gen then
    gen, req = usage_from_node_hash(redis.call('HGETALL', node_key))
    ports = -1
    if from_floor then
      gen = math.max(gen, generation_floor())
    end
  end
  if ports < 0 then ports = redis.call('HLEN', ports_key) end  -- -1: unknown (older node sets)
  return gen, ports, req
end

-- As node_usage, with the amounts as their text (see usage_items): gen, host ports in
-- use, the text after the record's second '|'.
local function node_usage_items(text, node_key, ports_key)
  if text then
    local gen, ports, items = string.match(text, USAGE_PATTERN)
    if gen then
      ports = ports == '0' and 0 or tonumber(ports)  -- (most nodes: no strtod)
      if ports < 0 then ports = redis.call('HLEN', ports_key) end
      return tonumber(gen), ports, items
    end
  end
  local gen, ports, req = node_usage(text, node_key, ports_key)
  return gen, ports, usage_items_text(req)
end

-- entries: list of {name = node, usage = usage_record(...)}; with deleted = gen, the node
-- left the ledger: its record goes to the log but leaves cache:usage, and the floor rises
-- to its generation.
local function bump_feed(entries)
  if #entries == 0 then return end
  local v = redis.call('INCR', KEYS[#KEYS])
  local log = KEYS[#KEYS - 1]
  -- A counter that starts over (its key was lost) starts the log over: ids must grow.
  if v == 1 then redis.call('DEL', log) end
  local xargs = { 'MINID', '~', string.format('%d', math.max(v - FEED_KEEP + 1, 0)),
                  string.format('%d-0', v) }
  local hargs, gone, floor = {}, {}, nil
  for _, e in ipairs(entries) do
    xargs[#xargs + 1] = e.name
    xargs[#xargs + 1] = e.usage
    if e.deleted then
      gone[#gone + 1] = e.name
      floor = math.max(floor or 0, e.deleted)
    else
      hargs[#hargs + 1] = e.name
      hargs[#hargs + 1] = e.usage
    end
  end
  redis.call('XADD', log, unpack(xargs))
  if #hargs > 0 then redis.call('HSET', KEYS[#KEYS - 2], unpack(hargs)) end
  if #gone > 0 then
    redis.call('HDEL', KEYS[#KEYS - 2], unpack(gone))
    if floor > generation_floor() then
      redis.call('SET', KEYS[#KEYS - 3], string.format('%d', floor))
    end
  end
end

-- The topology keys some pod with inter-pod constraints watches (cache:topokeys): only the
-- domains of these keys need a generation (see distsched.cache.ledger).
local function watched_keys(topokeys_key)
  local watched = {}
  for _, k in ipairs(redis.call('SMEMBERS', topokeys_key)) do watched[k] = true end
  return watched
end
