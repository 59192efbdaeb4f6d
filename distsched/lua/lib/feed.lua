-- Shared by the ledger scripts that change a node's usage (included with "--!include feed").
-- Change feed (last three KEYS): bump the version, stamp the touched nodes with it, and
-- store each one's usage record "<gen>|<host ports in use, -1 unknown>|<res>=<amount>,..."
-- so a worker that saw version v refreshes with one ZRANGEBYSCORE (v +inf and one HMGET.
local function bump_feed(entries)
  if #entries == 0 then return end
  local v = redis.call('INCR', KEYS[#KEYS])
  local zargs, hargs = {}, {}
  for _, e in ipairs(entries) do
    zargs[#zargs + 1] = v
    zargs[#zargs + 1] = e.name
    local flat = redis.call('HGETALL', e.node_key)
    local req, gen = {}, '0'
    for j = 1, #flat, 2 do
      local f = flat[j]
      if string.sub(f, 1, 4) == 'req:' then
        req[#req + 1] = string.sub(f, 5) .. '=' .. flat[j + 1]
      elseif f == 'gen' then
        gen = flat[j + 1]
      end
    end
    local ports = -1
    if e.ports_key then ports = redis.call('HLEN', e.ports_key) end
    hargs[#hargs + 1] = e.name
    hargs[#hargs + 1] = gen .. '|' .. ports .. '|' .. table.concat(req, ',')
  end
  redis.call('ZADD', KEYS[#KEYS - 1], unpack(zargs))
  redis.call('HSET', KEYS[#KEYS - 2], unpack(hargs))
end
