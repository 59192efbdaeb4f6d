-- store_update.lua: replace one existing object if its resourceVersion is unchanged.
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
-- ARGV[5]  string  expected resourceVersion: the rv of the stored object Python merged into
--                  the new one (decimal string)
-- ARGV[6]  string  uid of the new object
-- ARGV[7]  string  spec.nodeName of the new object ("" if none)
-- ARGV[8]  bytes   msgpack of the new object up to its metadata.resourceVersion value
-- ARGV[9]  bytes   msgpack of the new object after that value
--
-- Python computes the whole new object (Lua cannot merge msgpack safely); the rv check
-- makes that read-modify-write atomic: any other write in between changed the rv.
--
-- Returns {"ok", rv} and appends a MODIFIED event (obj = new, old = previous);
--         {"notfound"}; {"conflict", current_rv}. Nothing is written unless "ok".

local meta_json = redis.call('HGET', KEYS[5], ARGV[4])
if not meta_json then
  return {'notfound'}
end
local meta = cjson.decode(meta_json)
if meta.rv ~= ARGV[5] then
  return {'conflict', meta.rv}
end

local epoch = redis.call('GET', KEYS[3])
if not epoch then
  epoch = ARGV[2]
  redis.call('SET', KEYS[3], epoch)
end
local old = redis.call('HGET', KEYS[4], ARGV[4])
local rv = string.format('%d', redis.call('INCR', KEYS[1]))
local blob = ARGV[8] .. string.char(0xa0 + #rv) .. rv .. ARGV[9]
redis.call('HSET', KEYS[4], ARGV[4], blob)
redis.call('HSET', KEYS[5], ARGV[4], cjson.encode({rv = rv, uid = ARGV[6], node = ARGV[7]}))
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], rv .. '-0',
  'type', 'MODIFIED', 'kind', ARGV[3], 'key', ARGV[4], 'rv', rv, 'epoch', epoch,
  'obj', blob, 'old', old)
return {'ok', tonumber(rv)}
