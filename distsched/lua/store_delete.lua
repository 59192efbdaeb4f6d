-- store_delete.lua: delete one object, optionally only if its uid matches.
--
-- KEYS[1]  string  global resourceVersion counter
-- KEYS[2]  stream  event stream
-- KEYS[3]  string  store epoch (set to ARGV[2] if missing)
-- KEYS[4]  hash    objects of the kind: key -> msgpack blob
-- KEYS[5]  hash    meta of the kind: key -> JSON {"rv", "uid", "node"}
--
-- ARGV[1]  int     stream cap (XADD MAXLEN ~)
-- ARGV[2]  string  epoch candidate (a fresh random id; used only if KEYS[3] is missing)
-- ARGV[3]  string  kind
-- ARGV[4]  string  key
-- ARGV[5]  string  uid precondition ("" = none)
--
-- Returns {"ok", rv, last_blob} and appends a DELETED event whose obj is the last stored
--         state (its metadata.resourceVersion is the previous rv; the event's rv field is
--         the deletion's); {"notfound"}; {"uid-mismatch", current_uid}.

local meta_json = redis.call('HGET', KEYS[5], ARGV[4])
if not meta_json then
  return {'notfound'}
end
local meta = cjson.decode(meta_json)
if ARGV[5] ~= '' and meta.uid ~= ARGV[5] then
  return {'uid-mismatch', meta.uid}
end

local epoch = redis.call('GET', KEYS[3])
if not epoch then
  epoch = ARGV[2]
  redis.call('SET', KEYS[3], epoch)
end
local old = redis.call('HGET', KEYS[4], ARGV[4])
local rv = string.format('%d', redis.call('INCR', KEYS[1]))
redis.call('HDEL', KEYS[4], ARGV[4])
redis.call('HDEL', KEYS[5], ARGV[4])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], rv .. '-0',
  'type', 'DELETED', 'kind', ARGV[3], 'key', ARGV[4], 'rv', rv, 'epoch', epoch, 'obj', old)
return {'ok', tonumber(rv), old}
