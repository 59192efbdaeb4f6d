-- activeQ helpers shared by the queue scripts (included with "--!include activeq").

-- activeQ's member: the queue timestamp zero-padded to 13 digits, "|", ns/name, so that
-- pods of equal priority (equal score) sort by timestamp, then by name.
local function active_member(ts, key)
  return string.format('%013d', ts) .. '|' .. key
end

-- Push one wake token per pod made active, keeping the list at most `cap` long.
local function wake(list_key, count, cap)
  if count <= 0 then return end
  local tokens = {}
  for i = 1, math.min(count, cap) do tokens[i] = '1' end
  redis.call('RPUSH', list_key, unpack(tokens))
  redis.call('LTRIM', list_key, -cap, -1)
end

-- kube's movePodsToActiveOrBackoffQueue for one pod: backoffQ while its backoff runs,
-- else activeQ. Updates info.w (and info.m); returns true when the pod became active.
local function to_active_or_backoff(key, info, now, active_key, backoff_key)
  if info.bo > now then
    info.w = 'backoff'
    redis.call('ZADD', backoff_key, info.bo, key)
    return false
  end
  info.w = 'active'
  info.m = active_member(info.ts, key)
  redis.call('ZADD', active_key, -info.p, info.m)
  return true
end
