-- Store meta values (T:store:meta:<Kind>), included with "--!include storemeta" by the store
-- scripts and by whoever checks a pod's binding (cache_release).
--   "<rv>|<node>|<bound_at>|<uid>"  e.g. "42|node-7||3f0c..." or "43|node-7|2024-05-01T10:00:00Z|3f0c..."
-- rv decimal; node = the pod's spec.nodeName ("" unbound, and for every other kind);
-- bound_at is set only while the stored blob predates the pod's binding (store_bind writes
-- the meta alone; readers apply node, rv and PodScheduled=True at bound_at to the blob);
-- uid last: it may hold anything, '|' included (node names cannot).
-- A meta written before this layout (JSON {"rv", "uid", "node"}) still parses.

-- rv, node, bound_at, uid of a meta value (all strings; rv nil if it does not parse).
local function meta_parse(raw)
  if string.byte(raw, 1) == 123 then  -- '{': the JSON layout of older versions
    local ok, m = pcall(cjson.decode, raw)
    if not ok or type(m) ~= 'table' then return nil end
    return tostring(m.rv), m.node or '', '', m.uid or ''
  end
  return string.match(raw, '^(%d+)|([^|]*)|([^|]*)|(.*)$')
end

-- rv, node and uid alone (what a bind checks).
local function meta_rv_node_uid(raw)
  if string.byte(raw, 1) == 123 then
    local rv, node, _, uid = meta_parse(raw)
    return rv, node, uid
  end
  return string.match(raw, '^(%d+)|([^|]*)|[^|]*|(.*)$')
end

local function meta_string(rv, node, bound_at, uid)
  return rv .. '|' .. node .. '|' .. bound_at .. '|' .. uid
end
