-- store_create.lua: create one or more objects, all or nothing.
--
-- KEYS[1]        string  global resourceVersion counter
-- KEYS[2]        stream  event stream
-- KEYS[3]        string  store epoch (set to ARGV[2] if missing)
-- KEYS[2+2s]     hash    objects of kind slot s (s = 1, 2, ...): key -> msgpack blob
-- KEYS[3+2s]     hash    meta of kind slot s: key -> "<rv>|<node>|<bound_at>|<uid>"
--
-- ARGV[1]        int     stream cap (XADD MAXLEN ~)
-- ARGV[2]        string  epoch candidate (a fresh random id; used only if KEYS[3] is missing)
-- ARGV[3]        int     n, the number of objects
-- then 8 ARGV per object i (0-based), from ARGV[4 + 8i]:
--   slot         int     kind slot s of this object (selects its two hashes)
--   kind         string  "Pod", "Node", ... (any kind the store keeps)
--   key          string  "ns/name" for namespaced kinds, "name" for cluster-scoped ones
--   uid          string  metadata.uid
--   node         string  spec.nodeName ("" when unbound or not a pod; no '|')
--   nominated    string  status.nominatedNodeName ("" when none or not a pod)
--   prefix       bytes   msgpack of the object up to its metadata.resourceVersion value
--   suffix       bytes   msgpack of the object after that value
--
-- The stored blob is prefix .. msgpack-str(rv) .. suffix: a complete msgpack object whose
-- metadata.resourceVersion is the rv assigned here (Python packed a placeholder there).
--
-- Returns {"ok", first_rv}: object i got resourceVersion first_rv + i, and one ADDED event
--         with stream id "<rv>-0" (obj = the blob; pods also node, and nom when set);
--         {"exists", i} or {"duplicate", i}: object i (1-based) already exists or appears
--         twice in the batch; nothing was written.

--!include storemeta
--!include storeevent

local n = tonumber(ARGV[3])
local seen = {}
for i = 0, n - 1 do
  local base = 4 + 8 * i
  local slot = tonumber(ARGV[base])
  local key = ARGV[base + 2]
  local meta_key = KEYS[3 + 2 * slot]
  if redis.call('HEXISTS', meta_key, key) == 1 then
    return {'exists', i + 1}
  end
  local id = slot .. '\0' .. key
  if seen[id] then
    return {'duplicate', i + 1}
  end
  seen[id] = true
end

local last = redis.call('INCRBY', KEYS[1], n)
local first = last - n + 1

for i = 0, n - 1 do
  local base = 4 + 8 * i
  local slot = tonumber(ARGV[base])
  local kind = ARGV[base + 1]
  local key = ARGV[base + 2]
  local node = ARGV[base + 4]
  local rv = string.format('%d', first + i)
  local blob = ARGV[base + 6] .. string.char(0xa0 + #rv) .. rv .. ARGV[base + 7]
  redis.call('HSET', KEYS[2 + 2 * slot], key, blob)
  redis.call('HSET', KEYS[3 + 2 * slot], key, meta_string(rv, node, '', ARGV[base + 3]))
  if kind ~= 'Pod' then
    store_event('ADDED', kind, key, rv, 'obj', blob)
  elseif ARGV[base + 5] == '' then
    store_event('ADDED', kind, key, rv, 'obj', blob, 'node', node)
  else
    store_event('ADDED', kind, key, rv, 'obj', blob, 'node', node, 'nom', ARGV[base + 5])
  end
end
return {'ok', first}
