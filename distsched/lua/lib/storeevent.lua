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

-- Append the event of rv (a decimal string): id "<rv>-0", then type, kind, key, rv,
-- epoch and the field/value pairs given after rv. With to_queue the same entry goes to
-- the queue handlers' stream too: the write made no queue move itself that the workers'
-- Python handlers would have made (a script that did leaves it out). The streams are
-- trimmed (MAXLEN ~ ARGV[1]) once per call by trim_events(), which every script that
-- appends calls last: trimming costs about a third of an XADD, and a batch appends many.
local appended = {}

local function store_event(to_queue, etype, kind, key, rv, ...)
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

-- Trim the streams this call appended to (about ARGV[1] entries are kept).
local function trim_events()
  for stream in pairs(appended) do redis.call('XTRIM', stream, 'MAXLEN', '~', ARGV[1]) end
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
