--[[ cache_claim: a binder takes the reservations of a binding job before acting on them.

A binding is acted on only while the ledger still holds its reservation under the job's
token, assumed (not yet bound): then its assume deadline is pushed to ARGV[1], in this same
script, so the reaper cannot release it while the binding cycle runs. A reservation
already bound under the token is a duplicate (the job ran before); one that is gone or
carries another token is stale (the reaper requeued the pod, or it was deleted: the pod
belongs to a newer attempt). The same call renews the deadline of pods held on Permit.

KEYS[1]  hash   cache:pods: ns/name -> ledger record (lib/ledger_record.lua)
KEYS[2]  zset   cache:assumed: ns/name -> assume deadline (ms)
ARGV[1]  int    new assume deadline (ms since epoch)
ARGV[2i], ARGV[2i+1]  pod key ns/name, reservation token
Returns one status per pod: "claimed" | "duplicate" | "stale".
]]

--!include ledger_record

local deadline = tonumber(ARGV[1])
if #KEYS ~= 2 or not deadline or deadline < 0 or #ARGV % 2 ~= 1 then
  return redis.error_reply('ERR cache_claim: expects 2 keys, a deadline and (pod key, token) pairs')
end
local out, renew = {}, {}
for i = 2, #ARGV, 2 do
  local key, token = ARGV[i], ARGV[i + 1]
  local rec = led_decode(redis.call('HGET', KEYS[1], key))
  if not rec or rec.token ~= token then
    out[#out + 1] = 'stale'
  elseif not redis.call('ZSCORE', KEYS[2], key) then
    out[#out + 1] = 'duplicate'
  else
    out[#out + 1] = 'claimed'
    renew[#renew + 1] = ARGV[1]
    renew[#renew + 1] = key
  end
end
if #renew > 0 then redis.call('ZADD', KEYS[2], 'XX', unpack(renew)) end
return out
