-- controller_lease.lua: take or renew the controller role's leader lease.
--
-- KEYS[1]   string  the lease: the holder's id, with a TTL
--
-- ARGV[1]   string  this instance's id
-- ARGV[2]   int     lease length (ms)
--
-- Returns 1 when this instance holds the lease for ARGV[2] ms from now (taken because it
-- was free or expired, or renewed because this instance held it), 0 when another holds it.
-- The TTL is Redis's own expiry (like every lock of the periodic work): a holder that stops
-- renewing loses the lease after ARGV[2] ms without anyone having to notice.

local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
return 1
