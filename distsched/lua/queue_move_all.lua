-- queue_move_all: kube's MoveAllToActiveOrBackoffQueue / movePodsToActiveOrBackoffQueue.
-- Records the move request (move_cycle = current cycle), then moves the unschedulable pods
-- the event may help: those with no recorded plugin, or with a plugin interested in the
-- event (or all, for a wildcard). Candidates are the whole set, or only the given keys
-- (the pre-check list computed by the caller). A moved pod goes to backoffQ while its
-- backoff has not expired, else to activeQ.
--
-- KEYS[1]  zset    unschedulable  member ns/name, score queue timestamp (ms)
-- KEYS[2]  zset    activeQ        member "<ts:013d>|ns/name", score -priority
-- KEYS[3]  zset    backoffQ       member ns/name, score backoff expiry (ms)
-- KEYS[4]  hash    info           ns/name -> queue record (lib/queue_record.lua)
-- KEYS[5]  string  cycle          scheduling cycle counter
-- KEYS[6]  string  move_cycle     set to the current cycle
-- KEYS[7]  list    wake           wake-up tokens for blocking pops
-- ARGV[1]  int     now_ms
-- ARGV[2]  int     wake_cap       longest the wake list may grow
-- ARGV[3]  0|1     wildcard       1 = every plugin is interested
-- ARGV[4]  int     n              number of interested plugin names that follow
-- ARGV[5 .. 4+n]          str  interested plugin names
-- ARGV[5+n]               0|1  1 = candidates are only the keys that follow
-- ARGV[6+n ..]            str  candidate pod keys (ns/name)
-- Returns: integer, the number of pods moved.

--!include queue_record
--!include precheck
--!include bulk

local now, wake_cap, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[4])
local wildcard = ARGV[3]
if not now or not wake_cap or wake_cap < 1 or not n or n < 0 or #ARGV < 5 + n then
  return redis.error_reply('queue_move_all: bad arguments')
end
if (wildcard ~= '0' and wildcard ~= '1') or (ARGV[5 + n] ~= '0' and ARGV[5 + n] ~= '1') then
  return redis.error_reply('queue_move_all: wildcard and keys flags must be 0 or 1')
end
local interested = {}
for i = 5, 4 + n do interested[ARGV[i]] = true end

local bad = wrong_types('queue_move_all', {{KEYS[1], 'zset'}, {KEYS[2], 'zset'}, {KEYS[3], 'zset'},
                                           {KEYS[4], 'hash'}, {KEYS[7], 'list'}})
if bad then return redis.error_reply(bad) end
local cycle, err = read_counter('queue_move_all', KEYS[5])
if err then return redis.error_reply(err) end
redis.call('SET', KEYS[6], cycle)
local candidates
if ARGV[5 + n] == '1' then
  candidates = {}
  for i = 6 + n, #ARGV do candidates[#candidates + 1] = ARGV[i] end
elseif redis.call('ZCARD', KEYS[1]) == 0 then
  return 0
else
  candidates = redis.call('ZRANGE', KEYS[1], 0, -1)
end

local function matches(plugins)
  if plugins == '' or wildcard == '1' then return true end
  for name in string.gmatch(plugins, '[^,]+') do
    if interested[name] then return true end
  end
  return false
end

local moved, activated = 0, 0
local done = {}
local to_active_widened = skiplist_begin(KEYS[2], #candidates)
local to_backoff_widened = skiplist_begin(KEYS[3], #candidates)
for _, key in ipairs(candidates) do
  -- A key listed twice is taken once: it is no longer unschedulable.
  local r = not done[key] and rec_decode(redis.call('HGET', KEYS[4], key))
  if r and r.w == 'unschedulable' and matches(r.pl) then
    done[key] = true
    redis.call('ZREM', KEYS[1], key)
    if to_active_or_backoff(key, r, now, KEYS[2], KEYS[3]) then
      activated = activated + 1
    end
    redis.call('HSET', KEYS[4], key, rec_encode(r))
    moved = moved + 1
  end
end
skiplist_end(KEYS[2], to_active_widened)
skiplist_end(KEYS[3], to_backoff_widened)
wake(KEYS[7], activated, wake_cap)
return moved
