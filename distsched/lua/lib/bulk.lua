-- Bulk commands over lists of any length (included with "--!include bulk"). Lua's unpack()
-- takes a few thousand values at most, so long lists go in slices; a flat list of pairs
-- is cut at even positions.

local BULK_SLICE = 2000

-- redis.call(command, key, <flat...>) in slices.
local function in_slices(command, key, flat)
  for first = 1, #flat, BULK_SLICE do
    redis.call(command, key, unpack(flat, first, math.min(first + BULK_SLICE - 1, #flat)))
  end
end

-- HMGET of any number of fields; values in field order (false when absent).
local function hmget_all(hash, fields)
  local values = {}
  for first = 1, #fields, BULK_SLICE do
    local part = redis.call('HMGET', hash,
      unpack(fields, first, math.min(first + BULK_SLICE - 1, #fields)))
    for j = 1, #part do values[first + j - 1] = part[j] end
  end
  return values
end

-- Adding many members to a sorted set. A sorted set that one ZADD creates starts as a
-- listpack whatever the number of members (Redis 7.0 chooses the encoding from the first
-- member alone), and a listpack takes each member by scanning itself, so the first 128 of
-- a big batch cost ~15k instructions each before the set is converted (a batch of 128
-- into an empty set: ~1.8M, more than half of what a pod costs Redis). A member longer
-- than zset-max-listpack-value (64 by default) converts the set, or creates it
-- converted: skiplist_begin puts one in before a script adds `count` members (when that
-- is many; a small listpack is cheap) and skiplist_end takes it out after, in the same
-- script, so no client ever sees it; nothing may read the set between the two.
local SKIPLIST_FROM = 32
local LONG_NAME = string.rep('~', 80)  -- longer than any *-max-listpack-value default

local function skiplist_begin(key, count)
  if count < SKIPLIST_FROM then return false end
  redis.call('ZADD', key, 0, LONG_NAME)
  return true
end

local function skiplist_end(key, begun)
  if begun then redis.call('ZREM', key, LONG_NAME) end
end

-- ZADD of a flat score/member list of any length, into a skiplist when it is long.
local function zadd_all(key, flat)
  local begun = skiplist_begin(key, #flat / 2)
  in_slices('ZADD', key, flat)
  skiplist_end(key, begun)
end

-- Hashes that hold a field per node (cache:usage, cache:capacity, cache:domgen) have the
-- same trap: Redis keeps a hash of short values as a listpack up to
-- hash-max-listpack-entries fields (compiled in as 512; the sample redis.conf says 128),
-- and finds each field by scanning the list, so with a few hundred nodes every node of a
-- reservation batch paid a scan of the whole hash for its usage and another for its
-- capacity. A field longer than hash-max-listpack-value converts a hash for good (a hash
-- never goes back to a listpack), and is taken out at once. Call it after a write that
-- leaves the hash non-empty: taking out its only field would delete the key.
local function hashtable_encoding(key)
  redis.call('HSET', key, LONG_NAME, '1')
  redis.call('HDEL', key, LONG_NAME)
end
