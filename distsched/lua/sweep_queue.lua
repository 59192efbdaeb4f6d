-- sweep_queue: the consistency sweep's half for the queue (not a move of kube's queue: it
-- reads the store and the ledger too). Each queue record is checked
-- against the store and against the place it names; nothing should ever need it (every
-- move is one script), but a record left behind would keep a deleted pod queued, and a pod
-- in no sub-queue would never be scheduled.
--
--   orphan  the store has no pod under the name, or one of another uid: the record and its
--           sub-queue entry go (its deletion was missed)
--   bound   the store has the pod bound: the record and its sub-queue entry go (a bound
--           pod is in no sub-queue)
--   lost    the record names a place that does not hold the pod (activeQ, backoffQ,
--           unschedulable, gated, inflight, dead, or the ledger's assumed set for
--           "assumed"). Repaired only when the caller saw the same record text in an
--           earlier sweep (ARGV pairs), so that a pod between the two halves of a move made
--           by two scripts is left alone: back into the place it names for backoffQ,
--           unschedulable, gated and dead, else into activeQ (its timestamp and attempts
--           kept)
--   ok      in its place; unreadable: the record does not decode (left as it is)
--
-- KEYS[1]  hash  info           ns/name -> queue record (lib/queue_record.lua)
-- KEYS[2]  zset  activeQ        member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  zset  backoffQ       member ns/name, score backoff expiry (ms)
-- KEYS[4]  zset  unschedulable  member ns/name, score queue ts (ms)
-- KEYS[5]  zset  gated          member ns/name, score ts (ms)
-- KEYS[6]  zset  inflight       member ns/name, score lease deadline (ms)
-- KEYS[7]  zset  dead           member ns/name, score time dead-lettered (ms)
-- KEYS[8]  zset  ledger cache:assumed: ns/name -> assume deadline (ms)
-- KEYS[9]  hash  store meta of pods: ns/name -> "<rv>|<node>|<bound_at>|<uid>"
-- KEYS[10] list  wake tokens for blocking pops
-- ARGV[1]  int   now (ms)
-- ARGV[2]  int   longest the wake list may grow
-- ARGV[3 + 2i] str pod key (ns/name); ARGV[4 + 2i] str the record text seen as "lost" by
--                  an earlier sweep, or ""
-- Returns: a flat array, per pod: verdict, then for "lost" the record text (else "");
-- verdicts: ok | orphan | bound | lost | repaired | unreadable.

--!include queue_record
--!include storemeta

local now, wake_cap = tonumber(ARGV[1]), tonumber(ARGV[2])
if not now or not wake_cap or wake_cap < 1 or #ARGV % 2 ~= 0 then
  return redis.error_reply('ERR sweep_queue: expects now, wake cap, then key/text pairs')
end
local place_of = { backoff = KEYS[3], unschedulable = KEYS[4], gated = KEYS[5],
                   inflight = KEYS[6], dead = KEYS[7], assumed = KEYS[8] }

local function holds(key, r)
  if r.w == 'active' then
    return redis.call('ZSCORE', KEYS[2], active_member(r.ts, key)) ~= false
  end
  local place = place_of[r.w]
  return place ~= nil and redis.call('ZSCORE', place, key) ~= false
end

local function leave(key, r)
  if r.w == 'active' then
    redis.call('ZREM', KEYS[2], active_member(r.ts, key))
  elseif place_of[r.w] and r.w ~= 'assumed' then
    redis.call('ZREM', place_of[r.w], key)
  end
  redis.call('HDEL', KEYS[1], key)
end

local out, activated = {}, 0
for i = 3, #ARGV, 2 do
  local key, seen = ARGV[i], ARGV[i + 1]
  local text = redis.call('HGET', KEYS[1], key)
  local verdict, detail = 'ok', ''
  local r = text and rec_decode(text)
  if not text then
    verdict = 'ok'
  elseif not r then
    verdict = 'unreadable'
  else
    local meta = redis.call('HGET', KEYS[9], key)
    local rv, node, _, uid = nil, '', '', ''
    if meta then rv, node, _, uid = meta_parse(meta) end
    if rv == nil or (r.uid ~= '' and uid ~= r.uid) then
      verdict = 'orphan'
      leave(key, r)
    elseif node ~= '' then
      verdict = 'bound'
      leave(key, r)
    elseif not holds(key, r) then
      if seen ~= text then
        verdict, detail = 'lost', text
      else
        verdict = 'repaired'
        if r.w == 'backoff' then
          redis.call('ZADD', KEYS[3], r.bo, key)
        elseif r.w == 'unschedulable' or r.w == 'gated' then
          redis.call('ZADD', place_of[r.w], r.ts, key)
        elseif r.w == 'dead' then
          redis.call('ZADD', KEYS[7], now, key)
        else
          to_active(key, r, KEYS[2])
          activated = activated + 1
        end
        redis.call('HSET', KEYS[1], key, rec_encode(r))
      end
    end
  end
  out[#out + 1] = verdict
  out[#out + 1] = detail
end
wake(KEYS[10], activated, wake_cap)
return out
