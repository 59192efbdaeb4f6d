-- sweep_gangs: the consistency sweep's half for gang membership: a member whose pod the
-- store no longer has leaves its group (its delete's handler missed it), so that the
-- group's count of members stays true. Checked here against the store, in the step that
-- repairs it: a pod re-created under the name since keeps its membership.
--
-- KEYS[1]  hash  gang:of        ns/name -> pod group (lib/gang.lua)
-- KEYS[2]  hash  gang:members   pod group -> comma-joined member keys
-- KEYS[3]  set   gang:held      members gated until their group is complete
-- KEYS[4]  hash  store meta of pods: ns/name -> "<rv>|<node>|<bound_at>|<uid>"
-- ARGV[i]  str   pod key (ns/name) an earlier sweep found without a pod
-- Returns: the keys that left their group.

--!include queue_record
--!include gang

local left = {}
for _, key in ipairs(ARGV) do
  if redis.call('HEXISTS', KEYS[4], key) == 0 and redis.call('HEXISTS', KEYS[1], key) == 1 then
    gang_leave(KEYS[1], KEYS[2], KEYS[3], key)
    left[#left + 1] = key
  end
end
return left
