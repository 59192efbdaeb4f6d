--[[ cache_confirm: binders bound assumed pods, so they become bound in the ledger.

The ledger keeps each pod's requests and ports; only the assume deadline goes away (a pod
is "bound" when it has a record in cache:pods and no entry in cache:assumed). The pod
leaves the scheduling queue: its info entry is deleted when it still says w="assumed"
for the same uid. One call confirms a whole binding batch.

KEYS[1]  hash   cache:pods: ns/name -> record JSON
KEYS[2]  zset   cache:assumed: ns/name -> assume deadline (ms)
KEYS[3]  hash   queue info: ns/name -> JSON
ARGV[2i-1]  string  pod key ns/name of pair i
ARGV[2i]    string  reservation token of pair i, as returned by cache_reserve
Returns an array with, per pair, 1 when the pod is (now or already) bound under that
token, 0 when the pod has no record or its record carries another token (the reservation
expired or was released).
]]

if #KEYS ~= 3 or #ARGV == 0 or #ARGV % 2 ~= 0 then
  return redis.error_reply('ERR cache_confirm: expects 3 keys and (pod key, token) pairs')
end
for i = 1, #ARGV, 2 do
  if ARGV[i] == '' then return redis.error_reply('ERR cache_confirm: empty pod key') end
end

local out = {}
local confirmed, drop = {}, {}
for i = 1, #ARGV, 2 do
  local key, token = ARGV[i], ARGV[i + 1]
  local raw = redis.call('HGET', KEYS[1], key)
  local ok, rec = false, nil
  if raw then ok, rec = pcall(cjson.decode, raw) end
  if ok and type(rec) == 'table' and rec.token == token then
    out[#out + 1] = 1
    confirmed[#confirmed + 1] = key
    local info_raw = redis.call('HGET', KEYS[3], key)
    if info_raw then
      local good, info = pcall(cjson.decode, info_raw)
      if good and type(info) == 'table' and info.w == 'assumed'
          and (info.uid == nil or info.uid == '' or info.uid == rec.uid) then
        drop[#drop + 1] = key
      end
    end
  else
    out[#out + 1] = 0
  end
end
if #confirmed > 0 then redis.call('ZREM', KEYS[2], unpack(confirmed)) end
if #drop > 0 then redis.call('HDEL', KEYS[3], unpack(drop)) end
return out
