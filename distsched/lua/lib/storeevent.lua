-- The store scripts' shared tail (included with "--!include storeevent"): the history
-- epoch and the event append. Every store script has KEYS[1] rv counter, KEYS[2] event
-- stream, KEYS[3] epoch, KEYS[4] the queue handlers' stream (q:events), ARGV[1] stream
-- cap, ARGV[2] epoch candidate.

local epoch_value = nil

-- The store's epoch, set to the candidate ARGV[2] by the first write ever.
local function store_epoch()
  if not epoch_value then
    epoch_value = redis.call('GET', KEYS[3])
    if not epoch_value then
      epoch_value = ARGV[2]
      redis.call('SET', KEYS[3], epoch_value)
    end
  end
  return epoch_value
end

-- Append the event of rv (a decimal string; rv_number the same as a number, which the
-- caller has: tonumber would run strtod per event): id "<rv>-0", then type, kind, key,
-- rv, epoch and the field/value pairs given after rv_number. With to_queue the same
-- entry goes to the queue handlers' stream too: the write made no queue move itself that
-- the workers' Python handlers would have made (a script that did leaves it out).
--
-- Batches. A pod event that goes to the store's stream alone is held back, and the pod
-- events of consecutive rvs of one type are appended as one entry (a create or a bind of
-- many pods is one entry instead of one per pod: every reader of the stream pays per
-- entry): id "<last rv>-0", fields type, kind, rv (the last), epoch, first (the first
-- rv), batch = msgpack array, one item per rv from first: {key, field, value, ...}, the
-- fields its own entry would have had after epoch (distsched.store.codec expands it), at
-- most BATCH_EVENTS of them (an informer reads up to 256 entries at a time: with a
-- ~1 KB pod object, at most ~16 MB). A held run of one event is appended as its own
-- entry. Any other append, and finish_events(), appends what is held first, so ids stay
-- in rv order. The streams are trimmed once per
-- call by finish_events(), which every script that appends calls last (trimming costs
-- about a third of an XADD, and a batch appends many), to about the last ARGV[1] rvs: by
-- id (MINID ~), not by entries, since an entry may hold many events.
local BATCH_EVENTS = 64
local appended = {}
local held = nil  -- {etype, kind, first, last, items}
local newest_rv = 0

local function append_held()
  local h = held
  if not h then return end
  held = nil
  if #h.items == 1 then
    local item = h.items[1]
    redis.call('XADD', KEYS[2], h.last .. '-0', 'type', h.etype, 'kind', h.kind,
      'key', item[1], 'rv', h.last, 'epoch', store_epoch(), unpack(item, 2))
  else
    redis.call('XADD', KEYS[2], h.last .. '-0', 'type', h.etype, 'kind', h.kind,
      'rv', h.last, 'epoch', store_epoch(), 'first', h.first, 'batch', cmsgpack.pack(h.items))
  end
  appended[KEYS[2]] = true
end

local function store_event(to_queue, etype, kind, key, rv, rv_number, ...)
  if rv_number > newest_rv then newest_rv = rv_number end
  if not to_queue and kind == 'Pod' then
    if held and (held.etype ~= etype or rv_number ~= held.last_number + 1
                 or #held.items >= BATCH_EVENTS) then
      append_held()
    end
    if not held then held = { etype = etype, kind = kind, first = rv, items = {} } end
    held.items[#held.items + 1] = { key, ... }
    held.last, held.last_number = rv, rv_number
    return
  end
  append_held()
  local epoch = store_epoch()
  redis.call('XADD', KEYS[2], rv .. '-0',
    'type', etype, 'kind', kind, 'key', key, 'rv', rv, 'epoch', epoch, ...)
  appended[KEYS[2]] = true
  if to_queue then
    redis.call('XADD', KEYS[4], rv .. '-0',
      'type', etype, 'kind', kind, 'key', key, 'rv', rv, 'epoch', epoch, ...)
    appended[KEYS[4]] = true
  end
end

-- Append what is held, then trim the streams this call appended to (the events of about
-- the last ARGV[1] rvs are kept).
local function finish_events()
  append_held()
  local below = newest_rv - tonumber(ARGV[1]) + 1
  if below <= 1 then return end
  local minid = string.format('%d-0', below)
  for stream in pairs(appended) do redis.call('XTRIM', stream, 'MINID', '~', minid) end
end

-- Whether the queue's handlers look at events of this kind at all (a PodGroup's minimum
-- is the queue's, for its gang; the storage objects move pods the volume plugins rejected).
local QUEUE_KINDS = {
  Pod = true, Node = true, PodGroup = true, PersistentVolume = true,
  PersistentVolumeClaim = true, StorageClass = true, CSINode = true, CSIDriver = true,
  CSIStorageCapacity = true,
}
local function queue_kind(kind)
  return QUEUE_KINDS[kind] == true
end
