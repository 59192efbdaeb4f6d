-- lock_release: let go of a short lock this holder took with SET NX PX, and wake one
-- process waiting for it (BLPOP on the wake list). A lock that expired and was taken by
-- someone else is left alone.
--
-- KEYS[1]  string  the lock: holder token, with a TTL
-- KEYS[2]  list    its wake list (at most one token)
-- ARGV[1]  string  the holder's token
-- Returns: 1 when released, 0 when the lock was not ours (any more).

if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('RPUSH', KEYS[2], '1')
redis.call('LTRIM', KEYS[2], -1, -1)
return 1
