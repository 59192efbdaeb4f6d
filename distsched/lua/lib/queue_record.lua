-- The scheduling queue's per-pod record and the moves every script shares (included with
-- "--!include queue_record" by the queue scripts and by the ledger and store scripts that
-- hand pods to and from the queue). This library is the record's only reader and writer.
--
-- A record is one line of text in the queue's info hash (ns/name -> record):
--
--   w|e|cy|a|d|u|p|ts|its|bo|pl|uid
--
--   w    where the pod is: active|backoff|unschedulable|gated|inflight|dead|assumed|''
--   e    lease epoch of the last pop (the fencing token)
--   cy   scheduling cycle of the last pop
--   a    attempts (+1 at pop)          d    deliveries since the last orderly outcome
--        (a pop handed back unattempted, queue_hand_back.lua, counts in neither)
--   u    1 while the object was updated in flight or assumed, else 0
--   p    priority (int32)              ts   queue timestamp ms (add, every failure re-add)
--   its  initial attempt timestamp ms  bo   backoff expiry ms (0 = never failed)
--   pl   comma-joined unschedulable plugins of the last failure ('' = none)
--   uid  the pod's uid; last, so that it may hold any character
--
-- The fields a pop, a reservation and a bind look at come first, so those moves (per pod,
-- the hot path) read and rewrite only the record's head as text (rec_pop, rec_assume_text,
-- rec_assumed_uid); the other moves decode the whole record into a table.
-- distsched.queue_types.encode_info / decode_info are the Python twins of rec_encode /
-- rec_decode. A pod's activeQ member is derived, never stored: active_member(ts, key).

--!include numbers

local REC_PATTERN = '^(%l*)|(%d+)|(%d+)|(%d+)|(%d+)|([01])|(%-?%d+)|(%d+)|(%d+)|(%d+)|([^|]*)|(.*)$'

-- A record written as JSON by versions before this layout (a deployment upgraded in
-- place): the same fields, "m" aside.
local function rec_from_json(text)
  local ok, j = pcall(cjson.decode, text)
  if not ok or type(j) ~= 'table' or type(j.w) ~= 'string' then return nil end
  return { w = j.w, e = tonumber(j.e) or 0, cy = tonumber(j.cy) or 0, a = tonumber(j.a) or 0,
           d = tonumber(j.d) or 0, u = tonumber(j.u) or 0, p = tonumber(j.p) or 0,
           ts = tonumber(j.ts) or 0, its = tonumber(j.its) or 0, bo = tonumber(j.bo) or 0,
           pl = type(j.pl) == 'string' and j.pl or '', uid = type(j.uid) == 'string' and j.uid or '' }
end

-- The record as a table, or nil when the text is not a record.
local function rec_decode(text)
  if not text then return nil end
  if string.byte(text, 1) == 123 then return rec_from_json(text) end  -- '{'
  local w, e, cy, a, d, u, p, ts, its, bo, pl, uid = string.match(text, REC_PATTERN)
  if not w then return nil end
  return { w = w, e = tonumber(e), cy = tonumber(cy), a = tonumber(a), d = tonumber(d),
           u = tonumber(u), p = tonumber(p), ts = tonumber(ts), its = tonumber(its),
           bo = tonumber(bo), pl = pl, uid = uid }
end

local function rec_encode(r)
  return string.format('%s|%d|%d|%d|%d|%d|%d|%d|%d|%d|%s|%s', r.w, r.e, r.cy, r.a, r.d,
    r.u, r.p, r.ts, r.its, r.bo, r.pl, r.uid)
end

-- Head-only moves. The head is w|e|cy|a|d|u; REST_PATTERN finds the uid after the head
-- and the four numbers and the plugins that follow it.
local HEAD_PATTERN = '^(%l*)|(%d+)|(%d+)|(%d+)|(%d+)|[01]|(.*)$'
local POP_PATTERN = '^%l*|%d+|%d+|(%d+)|(%d+)|[01]|(.*)$'  -- what a pop rewrites: a, d, the rest
local UID_PATTERN = '^(%l*)|(%d+)|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|(.*)$'

-- queue_pop's move: returns the new text and whether the pod is dead-lettered instead
-- (delivered max_deliveries times), or nil when the text is not a record.
local function rec_pop(text, cycle, epoch, max_deliveries)
  if not text then return nil end
  if string.byte(text, 1) == 123 then text = rec_encode(rec_from_json(text) or {}) end
  local a, d, rest = string.match(text, POP_PATTERN)
  if not a then return nil end
  local deliveries = number_of(d)  -- (a batch's pods share a few counts: parsed once each)
  if deliveries >= max_deliveries then
    local _, e, cy = string.match(text, HEAD_PATTERN)
    return 'dead|' .. e .. '|' .. cy .. '|' .. a .. '|' .. d .. '|0|' .. rest, true
  end
  return string.format('inflight|%d|%d|%d|%d|0|', epoch, cycle, number_of(a) + 1,
    deliveries + 1) .. rest, false
end

-- The record's place, lease epoch and uid, read without decoding the rest.
local function rec_fencing(text)
  if not text then return nil end
  if string.byte(text, 1) == 123 then
    local r = rec_from_json(text)
    if not r then return nil end
    return r.w, r.e, r.uid
  end
  local w, e, uid = string.match(text, UID_PATTERN)
  if not w then return nil end
  return w, tonumber(e), uid
end

-- The hand-off to the cache as text: (new text) when the pod is inflight under this epoch
-- and uid, else (nil, why). Same rule as rec_assumable + rec_assume.
local INFLIGHT_PATTERN = '^inflight|(%d+)|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|(.*)$'
-- `epoch_text` is the lease epoch as canonical decimal text, as records write it: the usual case
-- compares texts, without strtod; any other record is read by rec_fencing and compared as
-- a number.
local function rec_assume_text(text, epoch_text, uid)
  -- The usual case first: an inflight record (two captures instead of rec_fencing's three).
  local e_text, inflight_uid = nil, nil
  if text then e_text, inflight_uid = string.match(text, INFLIGHT_PATTERN) end
  if e_text == epoch_text and (inflight_uid == '' or inflight_uid == uid) then
    return 'assumed' .. string.sub(text, 9)
  end
  local epoch = tonumber(epoch_text)
  local w, e, have_uid = rec_fencing(text)
  if not w then return nil, 'pod has no queue record' end
  if w ~= 'inflight' then return nil, 'pod is not inflight' end
  if e ~= epoch then return nil, 'lease epoch ' .. epoch .. ' is not current' end
  if have_uid ~= '' and have_uid ~= uid then return nil, 'pod uid changed' end
  if string.byte(text, 1) == 123 then
    local r = rec_from_json(text)
    r.w = 'assumed'
    return rec_encode(r)
  end
  return 'assumed' .. string.sub(text, 9)
end

-- Whether the text is the assumed pod of this uid (rec_is_assumed on text).
local ASSUMED_UID_PATTERN = '^assumed|%d+|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|(.*)$'
local function rec_text_is_assumed(text, uid)
  if not text then return false end
  if string.byte(text, 1) == 123 then
    local w, _, have_uid = rec_fencing(text)
    return w == 'assumed' and (have_uid == '' or have_uid == uid)
  end
  local have_uid = string.match(text, ASSUMED_UID_PATTERN)
  return have_uid ~= nil and (have_uid == '' or have_uid == uid)
end

-- A new pod's record (not yet placed anywhere: w = '').
local function rec_new(uid, priority, now)
  return { w = '', p = priority, ts = now, its = now, a = 0, cy = 0, e = 0, d = 0, bo = 0,
           u = 0, pl = '', uid = uid }
end

-- activeQ's member: the queue timestamp zero-padded to 13 digits, "|", ns/name, so that
-- pods of equal priority (equal score) sort by timestamp, then by name.
-- active_prefix(ts) .. key: a caller making many pods active at one ts formats it once.
local function active_prefix(ts)
  return string.format('%013d', ts) .. '|'
end

local function active_member(ts, key)
  return active_prefix(ts) .. key
end

-- The record of a pod new to the queue and made active at `now` (rec_encode of
-- rec_new(uid, priority, now) with w = 'active') as text, without a table per pod:
-- new_active_record(priority, new_active_middle(now), uid), the middle made once.
local function new_active_middle(now)
  return string.format('|%d|%d|0||', now, now)
end

local function new_active_record(priority, middle, uid)
  return 'active|0|0|0|0|0|' .. string.format('%d', priority) .. middle .. uid
end

-- Push one wake token per pod made active, keeping the list at most `cap` long.
local function wake(list_key, count, cap)
  if count <= 0 then return end
  local tokens = {}
  for i = 1, math.min(count, cap) do tokens[i] = '1' end
  redis.call('RPUSH', list_key, unpack(tokens))
  redis.call('LTRIM', list_key, -cap, -1)
end

-- kube's calculateBackoffDuration: initial, doubled per attempt after the first, capped;
-- overflow-safe.
local function backoff_ms(attempts, initial, maximum)
  local d = initial
  for _ = 2, attempts do
    if d > maximum - d then return maximum end
    d = d + d
  end
  return d
end

-- Into activeQ (sets r.w; the caller writes the record and wakes poppers).
local function to_active(key, r, active_key)
  r.w = 'active'
  redis.call('ZADD', active_key, -r.p, active_member(r.ts, key))
end

-- kube's movePodsToActiveOrBackoffQueue for one pod: backoffQ while its backoff runs,
-- else activeQ. Returns true when the pod became active.
local function to_active_or_backoff(key, r, now, active_key, backoff_key)
  if r.bo > now then
    r.w = 'backoff'
    redis.call('ZADD', backoff_key, r.bo, key)
    return false
  end
  to_active(key, r, active_key)
  return true
end

-- Hand-off to the cache: a reservation took the pod out of inflight (the ledger script
-- ZREMs it). Only a pod the caller leased under `epoch` may be assumed.
local function rec_assumable(r, epoch, uid)
  if not r then return false, 'pod has no queue record' end
  if r.w ~= 'inflight' then return false, 'pod is not inflight' end
  if r.e ~= epoch then return false, 'lease epoch ' .. epoch .. ' is not current' end
  if r.uid ~= '' and r.uid ~= uid then return false, 'pod uid changed' end
  return true
end

local function rec_assume(r)
  r.w = 'assumed'
end

-- Whether the record is the assumed pod of this uid (the reaper requeues only such a pod;
-- the store forgets it once bound).
local function rec_is_assumed(r, uid)
  return r ~= nil and r.w == 'assumed' and (r.uid == '' or r.uid == uid)
end

-- An assumed pod whose reservation was released without a binding (expired, or its node
-- went away) goes back: to backoffQ for the backoff of its attempts, or to activeQ when
-- that is 0. Deliveries stay counted, so a pod that keeps killing binders is
-- dead-lettered by queue_pop. Its plugins are cleared: no plugin rejected it (kube's
-- error backoff, which a pop from backoffQ leaves alone). Returns true when the pod became
-- active.
local function rec_requeue_released(key, r, now, initial, maximum, active_key, backoff_key)
  local wait = backoff_ms(r.a, initial, maximum)
  r.ts = now
  r.pl = ''
  if wait > 0 then
    r.bo = now + wait
    r.w = 'backoff'
    redis.call('ZADD', backoff_key, r.bo, key)
    return false
  end
  r.bo = 0
  to_active(key, r, active_key)
  return true
end
