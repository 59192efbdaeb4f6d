--[[ cache_confirm: the binder bound an assumed pod, so it becomes bound in the ledger.

The ledger keeps the pod's requests and ports; only the assume deadline goes away (a pod
is "bound" when it has a record in cache:pods and no entry in cache:assumed). The pod
leaves the scheduling queue: its info entry is deleted when it still says w="assumed"
for the same uid.

KEYS[1]  hash   cache:pods: ns/name -> record JSON
KEYS[2]  zset   cache:assumed: ns/name -> assume deadline (ms)
KEYS[3]  hash   queue info: ns/name -> JSON
ARGV[1]  string pod key ns/name
ARGV[2]  string reservation token returned by cache_reserve
Returns 1 when the pod is (now or already) bound under that token, 0 when the pod has no
record or its record carries another token (the reservation expired or was released).
]]

if type(ARGV[1]) ~= 'string' or ARGV[1] == '' or #ARGV ~= 2 or #KEYS ~= 3 then
  return redis.error_reply('ERR cache_confirm: expects 3 keys, a pod key and a token')
end
local key, token = ARGV[1], ARGV[2]
local raw = redis.call('HGET', KEYS[1], key)
if not raw then return 0 end
local ok, rec = pcall(cjson.decode, raw)
if not ok or type(rec) ~= 'table' or rec.token ~= token then return 0 end
local info_raw = redis.call('HGET', KEYS[3], key)
local drop_info = false
if info_raw then
  local good, info = pcall(cjson.decode, info_raw)
  drop_info = good and type(info) == 'table' and info.w == 'assumed'
    and (info.uid == nil or info.uid == '' or info.uid == rec.uid)
end
redis.call('ZREM', KEYS[2], key)
if drop_info then redis.call('HDEL', KEYS[3], key) end
return 1
