-- queue_hand_back: popped pods a worker did not attempt (an infrastructure error stopped
-- it: Redis unreachable, a replica that did not acknowledge the pop) are given back with
-- their pop not counted: attempts and deliveries go back down by one, so a healthy pod is
-- never dead-lettered for the infrastructure's failures, only for the processes it kills.
-- Each (key, epoch) is the lease the pop returned; a pod popped again since (another
-- epoch), deleted, or given an orderly outcome meanwhile (done, a failure add: d = 0) is
-- left alone, and so is a pod the cache holds (assumed: its reservation's reaper
-- requeues it). Where the pod is now:
--   inflight  back to activeQ at its old place (its queue timestamp is unchanged)
--   dead      dead-lettered by a later pop that counted this delivery: back to activeQ
--   else      (its lease expired and the reaper requeued it, counted) only uncounted
--
-- KEYS[1]  hash  info      ns/name -> queue record (lib/queue_record.lua)
-- KEYS[2]  zset  inflight  member ns/name, score lease deadline (ms)
-- KEYS[3]  zset  dead      member ns/name, score time dead-lettered (ms)
-- KEYS[4]  zset  activeQ   member "<ts:013d>|ns/name", score -priority
-- KEYS[5]  list  wake      wake-up tokens for blocking pops
-- ARGV[1]     int  wake_cap  longest the wake list may grow
-- ARGV[2i]    str  key       ns/name
-- ARGV[2i+1]  int  epoch     lease epoch returned by the pop
-- Returns: array, per pod, where it is afterwards ('active', ... or '' when left alone; a
-- key listed twice is handed back once).

--!include queue_record
--!include bulk
--!include precheck

local wake_cap = tonumber(ARGV[1])
if not wake_cap or wake_cap < 1 or #ARGV % 2 ~= 1 then
  return redis.error_reply('queue_hand_back: expects wake_cap, then key, epoch pairs')
end
for i = 3, #ARGV, 2 do
  if not tonumber(ARGV[i]) then
    return redis.error_reply('queue_hand_back: epoch must be a number')
  end
end
local bad = wrong_types('queue_hand_back', {{KEYS[1], 'hash'}, {KEYS[2], 'zset'},
  {KEYS[3], 'zset'}, {KEYS[4], 'zset'}, {KEYS[5], 'list'}})
if bad then return redis.error_reply(bad) end

local keys, epochs = {}, {}
for i = 2, #ARGV, 2 do
  keys[#keys + 1] = ARGV[i]
  epochs[#keys] = tonumber(ARGV[i + 1])
end
local records = hmget_all(KEYS[1], keys)
local out, fields, seen = {}, {}, {}
local activated = 0
for n, key in ipairs(keys) do
  local r = not seen[key] and rec_decode(records[n])
  seen[key] = true
  local where = ''
  if r and r.e == epochs[n] and r.d > 0 and r.w ~= 'assumed' and r.w ~= '' then
    r.d = r.d - 1
    if r.a > 0 then r.a = r.a - 1 end
    if r.w == 'inflight' or r.w == 'dead' then
      redis.call('ZREM', r.w == 'inflight' and KEYS[2] or KEYS[3], key)
      to_active(key, r, KEYS[4])
      activated = activated + 1
    end
    fields[#fields + 1] = key
    fields[#fields + 1] = rec_encode(r)
    where = r.w
  end
  out[n] = where
end
in_slices('HSET', KEYS[1], fields)
wake(KEYS[5], activated, wake_cap)
return out
