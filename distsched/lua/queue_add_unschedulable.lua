-- queue_add_unschedulable: kube's AddUnschedulableIfNotPresent, the failure handler's entry.
-- Accepted only from the holder of the pod's last lease (epoch match) while the pod is not
-- waiting in a sub-queue. The pod gets a new queue timestamp, its unschedulable plugins
-- and a backoff expiry of now + backoff(attempts). It goes to backoffQ on error, or when a
-- move request arrived during or after its scheduling cycle (moveRequestCycle >= cycle),
-- else to the unschedulable set. A pod whose object was updated while it was in flight
-- (u = 1, see queue_update) goes to activeQ instead: kube's Update already put it there,
-- and its AddUnschedulableIfNotPresent finds it present.
--
-- KEYS[1]  hash    info           ns/name -> queue record (lib/queue_record.lua)
-- KEYS[2]  zset    inflight       member ns/name
-- KEYS[3]  zset    backoffQ       member ns/name, score backoff expiry (ms)
-- KEYS[4]  zset    unschedulable  member ns/name, score queue timestamp (ms)
-- KEYS[5]  string  move_cycle     scheduling cycle of the last move request
-- KEYS[6]  zset    activeQ        member "<ts:013d>|ns/name", score -priority
-- KEYS[7]  list    wake           wake-up tokens for blocking pops
-- ARGV[1]  str     key            ns/name
-- ARGV[2]  int     epoch          lease epoch returned by the pop
-- ARGV[3]  str     plugins        comma-joined unschedulable plugin names ('' = none;
--                                 ignored on error)
-- ARGV[4]  int     now_ms
-- ARGV[5]  0|1     error          1 = the attempt failed with an error (always backoff)
-- ARGV[6]  int     initial_backoff_ms
-- ARGV[7]  int     max_backoff_ms
-- ARGV[8]  int     wake_cap       longest the wake list may grow
-- Returns: 'stale' | 'present' | 'backoff' | 'unschedulable' | 'active'.

--!include queue_record
--!include precheck

local key, plugins = ARGV[1], ARGV[3]
local epoch, now = tonumber(ARGV[2]), tonumber(ARGV[4])
local initial, max_backoff = tonumber(ARGV[6]), tonumber(ARGV[7])
local wake_cap = tonumber(ARGV[8])
if not epoch or not now or not initial or not max_backoff or not wake_cap or wake_cap < 1 then
  return redis.error_reply('queue_add_unschedulable: numeric arguments expected')
end
if ARGV[5] ~= '0' and ARGV[5] ~= '1' then
  return redis.error_reply('queue_add_unschedulable: error must be 0 or 1')
end
if string.find(plugins, '|', 1, true) then
  return redis.error_reply('queue_add_unschedulable: plugin names must not contain "|"')
end

local r = rec_decode(redis.call('HGET', KEYS[1], key))
if not r then return 'stale' end
if r.e ~= epoch then return 'stale' end
if r.w ~= 'inflight' and r.w ~= 'assumed' and r.w ~= '' then return 'present' end

local bad = wrong_types('queue_add_unschedulable', {{KEYS[2], 'zset'}, {KEYS[3], 'zset'},
  {KEYS[4], 'zset'}, {KEYS[6], 'zset'}, {KEYS[7], 'list'}})
if bad then return redis.error_reply(bad) end
local move_cycle, err = read_counter('queue_add_unschedulable', KEYS[5])
if err then return redis.error_reply(err) end
redis.call('ZREM', KEYS[2], key)
r.ts = now
-- An error clears the plugins, as kube's: no plugin rejected the pod (error backoff, which
-- a pop from backoffQ leaves alone).
r.pl = ARGV[5] == '1' and '' or plugins
r.d = 0
r.bo = now + backoff_ms(r.a, initial, max_backoff)
if r.u == 1 then
  r.u = 0
  to_active(key, r, KEYS[6])
  wake(KEYS[7], 1, wake_cap)
elseif ARGV[5] == '1' or move_cycle >= r.cy then
  r.w = 'backoff'
  redis.call('ZADD', KEYS[3], r.bo, key)
else
  r.w = 'unschedulable'
  redis.call('ZADD', KEYS[4], now, key)
end
redis.call('HSET', KEYS[1], key, rec_encode(r))
return r.w
