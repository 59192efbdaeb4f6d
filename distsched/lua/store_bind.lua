-- store_bind.lua: bind a batch of pods to nodes; each pod independently.
--
-- KEYS[1]  string  global resourceVersion counter
-- KEYS[2]  stream  event stream
-- KEYS[3]  string  store epoch (set to ARGV[2] if missing)
-- KEYS[4]  hash    pod objects: "ns/name" -> msgpack blob
-- KEYS[5]  hash    pod meta: "ns/name" -> JSON {"rv", "uid", "node"}
-- Reservation mode (the binder's), when 8 KEYS are given:
-- KEYS[6]  hash    ledger cache:pods: "ns/name" -> ledger record (lib/ledger_record.lua)
-- KEYS[7]  zset    ledger cache:assumed: "ns/name" -> assume deadline (ms)
-- KEYS[8]  hash    queue info: "ns/name" -> queue record (lib/queue_record.lua)
--
-- ARGV[1]  int     stream cap (XADD MAXLEN ~)
-- ARGV[2]  string  epoch candidate (a fresh random id; used only if KEYS[3] is missing)
-- ARGV[3]  int     n, the number of bindings
-- then 6 ARGV per binding i (0-based), from ARGV[4 + 6i] (7 in reservation mode):
--   key          string  "ns/name"
--   uid          string  uid precondition ("" = none)
--   node         string  target node name
--   expected_rv  string  rv of the pod Python read and built the bound object from
--   prefix       bytes   msgpack of the bound pod up to its metadata.resourceVersion value
--   suffix       bytes   msgpack of the bound pod after that value
--   token        string  (reservation mode) the reservation token the binding carries
--
-- Checks per pod, in order: exists, uid, already on this node (idempotent, no write),
-- bound elsewhere, rv unchanged since Python's read (else Python rebuilds and retries);
-- in reservation mode a pod is written only while the ledger still holds its reservation
-- on that node under the token ("unreserved" otherwise, before any other outcome but
-- "already-bound": the reaper took it, or the pod was deleted), and the
-- reservation is confirmed (assumed -> bound, queue info dropped) in the same script, so
-- a binder stalled past its reservation can never bind over capacity given to others.
--
-- Returns a flat array of 2n values, a (status, detail) pair per binding:
--   "bound", new_rv | "already-bound", "" | "conflict", current_node | "not-found", "" |
--   "uid-mismatch", current_uid | "stale", current_rv | "unreserved", ""
-- Each "bound" appends a MODIFIED event (obj = bound pod, old = previous).

--!include queue_record
--!include ledger_record

local n = tonumber(ARGV[3])
local out = {}
local epoch = nil
local reserving = #KEYS == 8
local stride = reserving and 7 or 6

-- ---- reservation block: the ledger's and the queue's hand-off (lib/ledger_record.lua,
-- lib/queue_record.lua). The ledger record of ``key`` when it holds a reservation on
-- ``node`` under ``token``.
local function reservation(key, node, token)
  local rec = led_decode(redis.call('HGET', KEYS[6], key))
  if rec and rec.node == node and rec.token == token then return rec end
  return nil
end

-- assumed -> bound in the ledger; the queue forgets the pod.
local function confirm(key, rec)
  redis.call('ZREM', KEYS[7], key)
  if rec_text_is_assumed(redis.call('HGET', KEYS[8], key), rec.uid) then
    redis.call('HDEL', KEYS[8], key)
  end
end
-- ---- end of the reservation block

for i = 0, n - 1 do
  local base = 4 + stride * i
  local key = ARGV[base]
  local node = ARGV[base + 2]
  local meta_json = redis.call('HGET', KEYS[5], key)
  local status, detail = nil, ''
  local meta = nil
  if not meta_json then
    status = 'not-found'
  else
    meta = cjson.decode(meta_json)
    if ARGV[base + 1] ~= '' and meta.uid ~= ARGV[base + 1] then
      status, detail = 'uid-mismatch', meta.uid
    elseif meta.node == node then
      status = 'already-bound'
    elseif meta.node ~= '' then
      status, detail = 'conflict', meta.node
    elseif meta.rv ~= ARGV[base + 3] then
      status, detail = 'stale', meta.rv
    end
  end
  -- Reservation mode: without the reservation nothing but a duplicate of our own bind
  -- is reported; the pod belongs to a newer attempt (or is gone), whatever the store says.
  local rec = nil
  if reserving then
    rec = reservation(key, node, ARGV[base + 6])
    if not rec and status ~= 'already-bound' then status, detail = 'unreserved', '' end
  end
  if rec and (not status or status == 'already-bound') then confirm(key, rec) end
  if not status then
    if not epoch then
      epoch = redis.call('GET', KEYS[3])
      if not epoch then
        epoch = ARGV[2]
        redis.call('SET', KEYS[3], epoch)
      end
    end
    local old = redis.call('HGET', KEYS[4], key)
    local rv = string.format('%d', redis.call('INCR', KEYS[1]))
    local blob = ARGV[base + 4] .. string.char(0xa0 + #rv) .. rv .. ARGV[base + 5]
    redis.call('HSET', KEYS[4], key, blob)
    redis.call('HSET', KEYS[5], key, cjson.encode({rv = rv, uid = meta.uid, node = node}))
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], rv .. '-0',
      'type', 'MODIFIED', 'kind', 'Pod', 'key', key, 'rv', rv, 'epoch', epoch,
      'obj', blob, 'old', old)
    status, detail = 'bound', rv
  end
  out[#out + 1] = status
  out[#out + 1] = detail
end
return out
