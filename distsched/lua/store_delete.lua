-- store_delete.lua: delete one object, optionally only if its uid matches.
--
-- KEYS[1]  string  global resourceVersion counter
-- KEYS[2]  stream  event stream
-- KEYS[3]  string  store epoch (set to ARGV[2] if missing)
-- KEYS[4]  stream  the queue handlers' events (q:events): this event too, for pods and nodes
-- KEYS[5]  hash    objects of the kind: key -> msgpack blob
-- KEYS[6]  hash    meta of the kind: key -> "<rv>|<node>|<bound_at>|<uid>"
-- For pods, the pod's own records elsewhere, deleted with it (KEYS 7 and 8 both or none):
-- KEYS[7]  hash    the queue's explain records (q:explain): its field key goes
-- KEYS[8]  list    the pod's Permit verdicts (permit:<ns/name>): deleted
--
-- ARGV[1]  int     stream cap: the events of about the last this many rvs stay (MINID ~,
--                  once per call)
-- ARGV[2]  string  epoch candidate (a fresh random id; used only if KEYS[3] is missing)
-- ARGV[3]  string  kind
-- ARGV[4]  string  key
-- ARGV[5]  string  uid precondition ("" = none)
--
-- Returns {"ok", rv, last_blob, last_meta} and appends a DELETED event whose obj is the
--         last stored blob, with objmeta = its meta when that blob predates the pod's
--         binding (readers apply it; the event's rv field is the deletion's), and for
--         pods node; {"notfound"}; {"uid-mismatch", current_uid}.

--!include storemeta
--!include storeevent

if #KEYS ~= 6 and #KEYS ~= 8 then
  return redis.error_reply('ERR store_delete: expects 6 keys, or 8 for a pod')
end
local meta_raw = redis.call('HGET', KEYS[6], ARGV[4])
if not meta_raw then
  return {'notfound'}
end
local _, node, bound_at, uid = meta_parse(meta_raw)
if ARGV[5] ~= '' and uid ~= ARGV[5] then
  return {'uid-mismatch', uid or ''}
end

local old = redis.call('HGET', KEYS[5], ARGV[4])
local rv_number = redis.call('INCR', KEYS[1])
local rv = string.format('%d', rv_number)
redis.call('HDEL', KEYS[5], ARGV[4])
redis.call('HDEL', KEYS[6], ARGV[4])
if #KEYS == 8 then
  redis.call('HDEL', KEYS[7], ARGV[4])
  redis.call('DEL', KEYS[8])
end
local extra = {'obj', old}
if bound_at and bound_at ~= '' then
  extra[#extra + 1] = 'objmeta'
  extra[#extra + 1] = meta_raw
end
if ARGV[3] == 'Pod' then
  extra[#extra + 1] = 'node'
  extra[#extra + 1] = node or ''
end
store_event(queue_kind(ARGV[3]), 'DELETED', ARGV[3], ARGV[4], rv, rv_number, unpack(extra))
finish_events()
return {'ok', rv_number, old, meta_raw}
