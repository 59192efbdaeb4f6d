-- store_update.lua: replace one existing object if its resourceVersion is unchanged.
--
-- KEYS[1]  string  global resourceVersion counter
-- KEYS[2]  stream  event stream
-- KEYS[3]  string  store epoch (set to ARGV[2] if missing)
-- KEYS[4]  stream  the queue handlers' events (q:events): this event too, for pods and nodes
-- KEYS[5]  hash    objects of the kind: key -> msgpack blob
-- KEYS[6]  hash    meta of the kind: key -> "<rv>|<node>|<bound_at>|<uid>"
--
-- ARGV[1]  int     stream cap: the events of about the last this many rvs stay (MINID ~,
--                  once per call)
-- ARGV[2]  string  epoch candidate (a fresh random id; used only if KEYS[3] is missing)
-- ARGV[3]  string  kind
-- ARGV[4]  string  key
-- ARGV[5]  string  expected resourceVersion: the rv of the stored object Python merged into
--                  the new one (decimal string)
-- ARGV[6]  string  uid of the new object
-- ARGV[7]  string  spec.nodeName of the new object ("" if none; no '|')
-- ARGV[8]  string  status.nominatedNodeName of the new object ("" if none)
-- ARGV[9]  string  "1": the event carries the previous object too (pods and nodes, whose
--                  queue handlers compare old and new), else ""
-- ARGV[10] bytes   msgpack of the new object up to its metadata.resourceVersion value
-- ARGV[11] bytes   msgpack of the new object after that value
--
-- Python computes the whole new object (Lua cannot merge msgpack safely); the rv check
-- makes that read-modify-write atomic: any other write in between changed the rv. The
-- whole object is stored, so a binding the meta alone held (bound_at) is in it now.
--
-- Returns {"ok", rv} and appends a MODIFIED event: obj = new; with ARGV[9], old = the
--         previous blob, plus oldmeta = the previous meta when that blob predates the
--         pod's binding (readers apply it); pods also node, and nom when set.
--         {"notfound"}; {"conflict", current_rv}. Nothing is written unless "ok".

--!include storemeta
--!include storeevent

local meta_raw = redis.call('HGET', KEYS[6], ARGV[4])
if not meta_raw then
  return {'notfound'}
end
local current_rv, _, bound_at = meta_parse(meta_raw)
if current_rv ~= ARGV[5] then
  return {'conflict', current_rv or ''}
end

local rv_number = redis.call('INCR', KEYS[1])
local rv = string.format('%d', rv_number)
local blob = ARGV[10] .. string.char(0xa0 + #rv) .. rv .. ARGV[11]
local extra = {'obj', blob}
if ARGV[9] == '1' then
  extra[#extra + 1] = 'old'
  extra[#extra + 1] = redis.call('HGET', KEYS[5], ARGV[4])
  if bound_at ~= '' then
    extra[#extra + 1] = 'oldmeta'
    extra[#extra + 1] = meta_raw
  end
end
if ARGV[3] == 'Pod' then
  extra[#extra + 1] = 'node'
  extra[#extra + 1] = ARGV[7]
  if ARGV[8] ~= '' then
    extra[#extra + 1] = 'nom'
    extra[#extra + 1] = ARGV[8]
  end
end
redis.call('HSET', KEYS[5], ARGV[4], blob)
redis.call('HSET', KEYS[6], ARGV[4], meta_string(rv, ARGV[7], '', ARGV[6]))
store_event(queue_kind(ARGV[3]), 'MODIFIED', ARGV[3], ARGV[4], rv, rv_number, unpack(extra))
finish_events()
return {'ok', rv_number}
