--[[ cache_node_remove: a node was deleted.

The node stops accepting reservations (live = "0", allocatable dropped, generation and its
domains' generations + 1; the generation is in its usage record, lib/ledger_record.lua).
Its assumed pods get assume deadline 0, so the next reap (cache_release expire, which the
caller runs right away) releases and requeues them; if the caller dies first, any
process's periodic reap does. Bound pods stay in the ledger until
their deletion arrives (the node is kept as a ghost, as kube-scheduler's cache keeps a node
with pods); a node without pods is deleted here (its usage record leaves cache:usage for
the feed's log and the generation floor, lib/ledger_record.lua).

KEYS[1]  set    cache:nodes: node names
KEYS[2]  hash   cache:domgen: "<topologyKey>=<value>" -> generation
KEYS[3]  zset   cache:assumed: ns/name -> assume deadline (ms)
KEYS[4]  hash   cache:node:<name>
KEYS[5]  hash   cache:ports:<name>
KEYS[6]  set    cache:nodepods:<name>
KEYS[7]  hash   cache:capacity: live node -> its allocatable (the node leaves it)
KEYS[n-3] string cache:genfloor: the highest generation of a deleted node's record
KEYS[n-2] hash  cache:usage: node -> its usage record (lib/ledger_record.lua)
KEYS[n-1] stream cache:feedlog: one entry per ledger version (change feed)
KEYS[n]   string cache:feedver: ledger version counter
ARGV[1]  string node name
Returns the keys of the node's assumed pods (now due for the reaper).
]]

--!include ledger_record


if #KEYS ~= 11 or #ARGV ~= 1 or ARGV[1] == '' then
  return redis.error_reply('ERR cache_node_remove: expects 11 keys and a node name')
end
redis.call('HDEL', KEYS[7], ARGV[1])
local flat = redis.call('HGETALL', KEYS[4])
if #flat == 0 then return {} end
local alloc_fields, doms = {}, {}
for j = 1, #flat, 2 do
  local f = flat[j]
  if string.sub(f, 1, 6) == 'alloc:' or f == 'gen' or string.sub(f, 1, 4) == 'req:' then
    alloc_fields[#alloc_fields + 1] = f  -- (gen, req:<res>: kept here by earlier versions)
  elseif string.sub(f, 1, 5) == 'topo:' then
    doms[#doms + 1] = string.sub(f, 6) .. '=' .. flat[j + 1]
  end
end
local gen, ports, req = node_usage(redis.call('HGET', KEYS[#KEYS - 2], ARGV[1]), KEYS[4], KEYS[5],
  true)
local pods = redis.call('SMEMBERS', KEYS[6])
local assumed = {}
for _, key in ipairs(pods) do
  if redis.call('ZSCORE', KEYS[3], key) then assumed[#assumed + 1] = key end
end

-- write
local deleted = nil
if #pods == 0 then
  redis.call('DEL', KEYS[4], KEYS[5], KEYS[6])
  redis.call('SREM', KEYS[1], ARGV[1])
  ports, req, deleted = 0, {}, gen + 1
else
  if #alloc_fields > 0 then redis.call('HDEL', KEYS[4], unpack(alloc_fields)) end
  redis.call('HSET', KEYS[4], 'live', '0')
  for _, key in ipairs(assumed) do redis.call('ZADD', KEYS[3], 0, key) end
end
for _, dom in ipairs(doms) do redis.call('HINCRBY', KEYS[2], dom, 1) end
bump_feed({ { name = ARGV[1], usage = usage_record(gen + 1, ports, req), deleted = deleted } })
return assumed
