-- store_create.lua: create one or more objects, all or nothing; pending pods enter the
-- scheduling queue in the same step when their profile lets the store decide (q:profiles).
--
-- KEYS[1]        string  global resourceVersion counter
-- KEYS[2]        stream  event stream
-- KEYS[3]        string  store epoch (set to ARGV[2] if missing)
-- KEYS[4]        stream  the queue handlers' events (q:events)
-- KEYS[5]        hash    q:profiles: schedulerName -> "g" | "n" | "p"
-- KEYS[6]        hash    queue info: ns/name -> queue record (lib/queue_record.lua)
-- KEYS[7]        zset    activeQ: "<ts:013d>|ns/name" -> -priority
-- KEYS[8]        zset    gated: ns/name -> queue timestamp (ms)
-- KEYS[9]        list    wake tokens for blocking pops
-- KEYS[10..13]   zset    backoffQ, unschedulable, inflight, dead (where a leftover record
--                        of another uid may sit)
-- KEYS[14]       hash    q:added: "active" -> pods enqueued here (a counter)
-- KEYS[13+2s]    hash    objects of kind slot s (s = 1, 2, ...): key -> msgpack blob
-- KEYS[14+2s]    hash    meta of kind slot s: key -> "<rv>|<node>|<bound_at>|<uid>"
--
-- ARGV[1]        int     stream cap: the events of about the last this many rvs stay
--                        (MINID ~, once per call)
-- ARGV[2]        string  epoch candidate (a fresh random id; used only if KEYS[3] is missing)
-- ARGV[3]        int     n, the number of objects
-- ARGV[4]        int     now (ms): the queue timestamp of pods enqueued here
-- ARGV[5]        int     wake cap: longest the wake list may grow
-- then 11 ARGV per object i (0-based), from ARGV[6 + 11i]:
--   slot         int     kind slot s of this object (selects its two hashes)
--   kind         string  "Pod", "Node", ... (any kind the store keeps)
--   key          string  "ns/name" for namespaced kinds, "name" for cluster-scoped ones
--   uid          string  metadata.uid
--   node         string  spec.nodeName ("" when unbound or not a pod; no '|')
--   nominated    string  status.nominatedNodeName ("" when none or not a pod)
--   prefix       bytes   msgpack of the object up to its metadata.resourceVersion value
--   suffix       bytes   msgpack of the object after that value
--   scheduler    string  spec.schedulerName of a pod ("" for other kinds)
--   priority     string  spec.priority of a pod (an int32; "" for other kinds)
--   gates        0|1|2   the pod has spec.schedulingGates (1), or belongs to a pod group (2:
--                        a gang member, which the handlers add with its group)
--
-- The stored blob is prefix .. msgpack-str(rv) .. suffix: a complete msgpack object whose
-- metadata.resourceVersion is the rv assigned here (Python packed a placeholder there).
--
-- A pending pod whose scheduler's profile is registered "n", or "g" when the pod has no
-- scheduling gates, is put into activeQ here exactly as the queue handlers' add would (a
-- pod the queue knows under this uid is left alone), and its event does
-- not go to q:events. A queue record under another uid is what a deleted pod of the same
-- name left, its delete not handled yet (the handler's delete then matches uids): it is
-- taken out of its sub-queue and replaced. Every other Pod and Node event goes to
-- q:events (a pod with gates among them: the handlers' PreEnqueue validates its gates);
-- other kinds' do not.
--
-- Returns {"ok", first_rv}: object i got resourceVersion first_rv + i, and one ADDED event
--         with stream id "<rv>-0" (obj = the blob; pods also node, and nom when set; the
--         pods this call enqueued, in runs of consecutive rvs, as batch entries: see
--         lib/storeevent.lua);
--         {"exists", i} or {"duplicate", i}: object i (1-based) already exists or appears
--         twice in the batch; nothing was written.

--!include numbers
--!include storemeta
--!include storeevent
--!include queue_record
--!include bulk

local ARGV = ARGV
local n = tonumber(ARGV[3])
local now, wake_cap = tonumber(ARGV[4]), tonumber(ARGV[5])

-- Reads and writes go one command per hash (per kind slot), not one per object: a batch
-- of pods costs a few commands plus its events.
local by_slot, slots, group_at = {}, {}, {}
local first_duplicate = nil
for i = 0, n - 1 do
  local base = 6 + 11 * i
  local slot = number_of(ARGV[base])
  local key = ARGV[base + 2]
  local group = by_slot[slot]
  if not group then
    group = { keys = {}, at = {}, objects = {}, metas = {}, seen = {}, n = 0,
              written = 0 }
    by_slot[slot] = group
    slots[#slots + 1] = slot
  end
  if group.seen[key] and not first_duplicate then first_duplicate = i end
  group.seen[key] = true
  local m = group.n + 1
  group.n = m
  group.keys[m] = key
  group.at[m] = i
  group_at[i] = group
end
local first_existing = nil
for _, slot in ipairs(slots) do
  local group = by_slot[slot]
  local found = hmget_all(KEYS[14 + 2 * slot], group.keys)
  for j = 1, #group.keys do
    if found[j] and (not first_existing or group.at[j] < first_existing) then
      first_existing = group.at[j]
    end
  end
end
-- The first object (in batch order) that exists or repeats an earlier one is the answer.
if first_existing and (not first_duplicate or first_existing < first_duplicate) then
  return {'exists', first_existing + 1}
end
if first_duplicate then
  return {'duplicate', first_duplicate + 1}
end

-- Whether a pending pod of this scheduler, with (gates = '1') or without scheduling gates,
-- goes straight into activeQ: its profile has no PreEnqueue plugin ("n"), or only
-- SchedulingGates ("g") and the pod has no gates; never a gang member (gates = '2').
local modes = {}
local function enqueue_here(scheduler, gates)
  local mode = modes[scheduler]
  if mode == nil then
    mode = redis.call('HGET', KEYS[5], scheduler) or ''
    modes[scheduler] = mode
  end
  return (mode == 'n' and gates ~= '2') or (mode == 'g' and gates == '0')
end

local function int32(text)
  local p = number_of(text)
  if p and p == math.floor(p) and p >= -2147483648 and p <= 2147483647 then return p end
  return nil
end

-- The sub-queue sets a record's place names (activeQ's member is derived).
local QUEUE_SETS = { backoff = KEYS[10], unschedulable = KEYS[11], inflight = KEYS[12],
                     dead = KEYS[13], gated = KEYS[8] }

local function leave_queue(key, r)
  if r.w == 'active' then
    redis.call('ZREM', KEYS[7], active_member(r.ts, key))
  elseif QUEUE_SETS[r.w] then
    redis.call('ZREM', QUEUE_SETS[r.w], key)
  end
end

-- Pending pods the store enqueues itself (i -> priority), with the queue records their
-- names already have.
local enqueue, candidates = {}, {}
for i = 0, n - 1 do
  local base = 6 + 11 * i
  local key = ARGV[base + 2]
  if ARGV[base + 1] == 'Pod' and ARGV[base + 4] == '' and not string.find(key, '|', 1, true) then
    local priority = enqueue_here(ARGV[base + 8], ARGV[base + 10]) and int32(ARGV[base + 9])
    if priority then
      enqueue[i] = priority
      candidates[#candidates + 1] = key
    end
  end
end
local queued = {}
if #candidates > 0 then
  local records = hmget_all(KEYS[6], candidates)
  for j, key in ipairs(candidates) do queued[key] = records[j] end
end

local last = redis.call('INCRBY', KEYS[1], n)
local first = last - n + 1
local infos, active, activated = {}, {}, 0
local member_prefix, record_middle = active_prefix(now), new_active_middle(now)

for i = 0, n - 1 do
  local base = 6 + 11 * i
  local kind = ARGV[base + 1]
  local key = ARGV[base + 2]
  local node = ARGV[base + 4]
  local rv_number = first + i
  local rv = string.format('%d', rv_number)
  local blob = ARGV[base + 6] .. string.char(0xa0 + #rv) .. rv .. ARGV[base + 7]
  local group = group_at[i]
  local m = 2 * group.written + 1
  group.written = group.written + 1
  group.objects[m], group.objects[m + 1] = key, blob
  group.metas[m], group.metas[m + 1] = key, meta_string(rv, node, '', ARGV[base + 3])
  if kind ~= 'Pod' then
    store_event(queue_kind(kind), 'ADDED', kind, key, rv, rv_number, 'obj', blob)
  else
    local enqueued = false
    local priority = enqueue[i]
    if priority then
      enqueued = true
      local known = rec_decode(queued[key])
      if known and known.uid ~= ARGV[base + 3] then
        leave_queue(key, known)
        known = nil
      end
      if not known then
        active[2 * activated + 1] = -priority
        active[2 * activated + 2] = member_prefix .. key
        infos[2 * activated + 1] = key
        infos[2 * activated + 2] = new_active_record(priority, record_middle, ARGV[base + 3])
        activated = activated + 1
      end
    end
    if ARGV[base + 5] == '' then
      store_event(not enqueued, 'ADDED', kind, key, rv, rv_number, 'obj', blob, 'node', node)
    else
      store_event(not enqueued, 'ADDED', kind, key, rv, rv_number, 'obj', blob, 'node', node,
        'nom', ARGV[base + 5])
    end
  end
end
for _, slot in ipairs(slots) do
  in_slices('HSET', KEYS[13 + 2 * slot], by_slot[slot].objects)
  in_slices('HSET', KEYS[14 + 2 * slot], by_slot[slot].metas)
end
zadd_all(KEYS[7], active)
in_slices('HSET', KEYS[6], infos)
wake(KEYS[9], activated, wake_cap)
if activated > 0 then redis.call('HINCRBY', KEYS[14], 'active', activated) end
finish_events()
return {'ok', first}
