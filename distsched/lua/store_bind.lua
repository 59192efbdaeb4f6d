-- store_bind.lua: bind a batch of pods to nodes; each pod independently.
--
-- KEYS[1]  string  global resourceVersion counter
-- KEYS[2]  stream  event stream
-- KEYS[3]  string  store epoch (set to ARGV[2] if missing)
-- KEYS[4]  stream  the queue handlers' events (q:events)
-- KEYS[5]  hash    pod meta: "ns/name" -> "<rv>|<node>|<bound_at>|<uid>"
-- Reservation mode (the binder's), when 11 KEYS are given:
-- KEYS[6]  hash    ledger cache:pods: "ns/name" -> ledger record (lib/ledger_record.lua)
-- KEYS[7]  zset    ledger cache:assumed: "ns/name" -> assume deadline (ms)
-- KEYS[8]  hash    queue info: "ns/name" -> queue record (lib/queue_record.lua)
-- KEYS[9]  string  queue cycle (scheduling cycle counter)
-- KEYS[10] string  queue move_cycle (set to the cycle: every binding is a move request)
-- KEYS[11] zset    queue unschedulable
--
-- With the scheduler's log of bindings as the last KEY (KEYS[6], or KEYS[12] in
-- reservation mode), the pods this call binds get kube's Scheduled event there
-- (distsched/event_log.py), as one entry for the call: n = how many, scheduled =
-- msgpack [ns/name, node, source, uid, ...] per pod; each binding then carries its source
-- (the pod's scheduler name) as its last ARGV, and the log's cap (in entries) follows the
-- last binding.
--
-- ARGV[1]  int     stream cap: the events of about the last this many rvs stay (MINID ~,
--                  once per call)
-- ARGV[2]  string  epoch candidate (a fresh random id; used only if KEYS[3] is missing)
-- ARGV[3]  string  the bindings' time (RFC 3339): PodScheduled's lastTransitionTime
-- ARGV[4]  int     n, the number of bindings
-- then 3 ARGV per binding i (0-based), from ARGV[5 + 3i] (4 in reservation mode):
--   key          string  "ns/name"
--   uid          string  uid precondition ("" = none)
--   node         string  target node name (non-empty, no '|')
--   token        string  (reservation mode) the reservation token the binding carries
--   source       string  (with the log of bindings) the pod's scheduler name
-- then, with the log of bindings, its cap in entries (MAXLEN ~ on its one XADD)
--
-- A bind writes the meta alone, "<rv>|<node>|<time>|<uid>": the pod's blob is left as it
-- was, and readers apply spec.nodeName, the rv and PodScheduled=True at <time> to it (the
-- next full write of the pod stores the whole object again). Nothing Python computed from
-- the object goes in, so there is no read-modify-write and no retry.
--
-- Checks per pod, in order: exists, uid, already on this node (idempotent, no write),
-- bound elsewhere; in reservation mode a pod is written only while the ledger still holds
-- its reservation on that node under the token ("unreserved" otherwise, before any other
-- outcome but "already-bound": the reaper took it, or the pod was deleted), and the
-- reservation is confirmed (assumed -> bound, queue info dropped) in the same script, so
-- a binder stalled past its reservation can never bind over capacity given to others.
--
-- Returns a flat array of 2n values, a (status, detail) pair per binding:
--   "bound", new_rv | "already-bound", "" | "conflict", current_node | "not-found", "" |
--   "uid-mismatch", current_uid | "unreserved", ""
-- Each "bound" appends a MODIFIED event without obj/old: fields type, kind, key, rv,
-- epoch, node, and bound = the time (the marker of a binding); those that do not go to
-- q:events as well, as one batch entry (lib/storeevent.lua). In reservation mode, while
-- no pod waits in the unschedulable set, the binding's queue moves are all made here (the
-- reservation confirmed, the pod forgotten, kube's AssignedPodAdd move request recorded:
-- move_cycle = cycle), so its event does not go to q:events; otherwise it does, for the
-- handlers to decide which parked pods it helps.

--!include storemeta
--!include storeevent
--!include queue_record
--!include ledger_record
--!include bulk

local ARGV = ARGV
local at = ARGV[3]
local n = tonumber(ARGV[4])
local out = {}
local reserving = #KEYS >= 11
local event_log = nil
if #KEYS == 6 or #KEYS == 12 then event_log = KEYS[#KEYS] end
local stride = 3 + (reserving and 1 or 0) + (event_log and 1 or 0)
local to_queue = true
if reserving and redis.call('ZCARD', KEYS[11]) == 0 then to_queue = false end

-- ---- reservation check / confirm: the ledger's and the queue's hand-off
-- (lib/ledger_record.lua, lib/queue_record.lua)
local LEDGER_PODS, LEDGER_ASSUMED, QUEUE_INFO = KEYS[6], KEYS[7], KEYS[8]
-- ---- end of the reservation block -----------------------------------------------------

-- Everything is read in bulk first, decided pod by pod (a key bound earlier in this call
-- counts as bound), then written in bulk.
local keys = {}
for i = 0, n - 1 do keys[i + 1] = ARGV[5 + stride * i] end

local metas = hmget_all(KEYS[5], keys)
local records, queued = {}, {}
if reserving then
  records = hmget_all(LEDGER_PODS, keys)
  queued = hmget_all(QUEUE_INFO, keys)
end

local bound_node, bound_uid = {}, {}  -- key -> node, uid of a pod bound earlier in this call
local confirmed, forgotten, seen_confirm = {}, {}, {}
local to_bind, n_bind = {}, 0  -- the positions i of the pods this call binds
for i = 1, n do
  local base = 5 + stride * (i - 1)
  local key = keys[i]
  local node = ARGV[base + 2]
  local status, detail = nil, ''
  local rv, cur_node, uid = nil, nil, nil
  if bound_node[key] then
    rv, cur_node, uid = 'bound', bound_node[key], bound_uid[key]
  elseif metas[i] then
    local parsed_rv, parsed_node, parsed_uid = meta_rv_node_uid(metas[i])
    rv, cur_node, uid = parsed_rv, parsed_node, parsed_uid
  end
  if not rv then
    status = 'not-found'
  elseif ARGV[base + 1] ~= '' and uid ~= ARGV[base + 1] then
    status, detail = 'uid-mismatch', uid
  elseif cur_node == node then
    status = 'already-bound'
  elseif cur_node ~= '' then
    status, detail = 'conflict', cur_node
  end
  -- Reservation mode: without the reservation nothing but a duplicate of our own bind
  -- is reported; the pod belongs to a newer attempt (or is gone), whatever the store says.
  if reserving then
    local rec_node, rec_token, rec_uid = led_holder(records[i])
    local held = rec_node == node and rec_token == ARGV[base + 3]
    if not held and status ~= 'already-bound' then status, detail = 'unreserved', '' end
    if held and (not status or status == 'already-bound') and not seen_confirm[key] then
      -- assumed -> bound in the ledger; the queue forgets the pod
      seen_confirm[key] = true
      confirmed[#confirmed + 1] = key
      if rec_text_is_assumed(queued[i], rec_uid) then forgotten[#forgotten + 1] = key end
    end
  end
  if not status then
    n_bind = n_bind + 1
    to_bind[n_bind] = i
    bound_node[key], bound_uid[key] = node, uid
    status = 'bound'
  end
  out[2 * i - 1] = status
  out[2 * i] = detail
end

if n_bind > 0 then
  local first_rv = redis.call('INCRBY', KEYS[1], n_bind) - n_bind + 1
  local fields = {}
  for j = 1, n_bind do
    local i = to_bind[j]
    local key = keys[i]
    local node, uid = bound_node[key], bound_uid[key]
    local rv_number = first_rv + j - 1
    local rv = string.format('%d', rv_number)
    fields[2 * j - 1], fields[2 * j] = key, meta_string(rv, node, at, uid)
    store_event(to_queue, 'MODIFIED', 'Pod', key, rv, rv_number, 'node', node, 'bound', at)
    out[2 * i] = rv
  end
  in_slices('HSET', KEYS[5], fields)
  if event_log then
    local items = {}
    for j = 1, n_bind do
      local i = to_bind[j]
      local key = keys[i]
      items[4 * j - 3], items[4 * j - 2] = key, bound_node[key]
      items[4 * j - 1] = ARGV[5 + stride * (i - 1) + stride - 1]
      items[4 * j] = bound_uid[key] or ''
    end
    redis.call('XADD', event_log, 'MAXLEN', '~', ARGV[5 + stride * n], '*',
      'n', n_bind, 'scheduled', cmsgpack.pack(items))
  end
  if not to_queue then
    redis.call('SET', KEYS[10], redis.call('GET', KEYS[9]) or '0')
  end
end
in_slices('ZREM', LEDGER_ASSUMED, confirmed)
in_slices('HDEL', QUEUE_INFO, forgotten)
finish_events()
return out
