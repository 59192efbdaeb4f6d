--[[ cache_confirm: binders bound assumed pods, so they become bound in the ledger.

The ledger keeps each pod's requests and ports; only the assume deadline goes away (a pod
is "bound" when it has a record in cache:pods and no entry in cache:assumed). The pod
leaves the scheduling queue: its record is deleted when it still says assumed for the
same uid (lib/queue_record.lua rec_is_assumed). One call confirms a whole binding batch.

KEYS[1]  hash   cache:pods: ns/name -> ledger record (lib/ledger_record.lua)
KEYS[2]  zset   cache:assumed: ns/name -> assume deadline (ms)
KEYS[3]  hash   queue info: ns/name -> queue record (lib/queue_record.lua)
ARGV[2i-1]  string  pod key ns/name of pair i
ARGV[2i]    string  reservation token of pair i, as returned by cache_reserve
Returns an array with, per pair, 1 when the pod is (now or already) bound under that
token, 0 when the pod has no record or its record carries another token (the reservation
expired or was released).
]]

--!include queue_record
--!include ledger_record
--!include bulk

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
  local rec = led_decode(redis.call('HGET', KEYS[1], key))
  if rec and rec.token == token then
    out[#out + 1] = 1
    confirmed[#confirmed + 1] = key
    if rec_text_is_assumed(redis.call('HGET', KEYS[3], key), rec.uid) then
      drop[#drop + 1] = key
    end
  else
    out[#out + 1] = 0
  end
end
in_slices('ZREM', KEYS[2], confirmed)
in_slices('HDEL', KEYS[3], drop)
return out
