"""Every Redis key name distsched uses, built in one place.

All keys of one scheduler deployment share the hash tag ``{ds:<scheduler>}`` so that a
Lua script may touch any of them in Redis Cluster (they live in one slot). Pods are
named ``namespace/name`` wherever they appear as members or fields.

Layout (``T`` = ``{ds:<scheduler>}``):

========================  ======  ==========================================================
key                       type    holds
========================  ======  ==========================================================
T:q:active                zset    activeQ. member ``<ts:013d>|ns/name``, score ``-priority``;
                                  ties on score sort by member, i.e. by queue timestamp.
T:q:backoff               zset    backoffQ. member ns/name, score = backoff expiry (ms)
T:q:unschedulable         zset    unschedulable pods. member ns/name, score = queue ts (ms)
T:q:gated                 zset    pods held by PreEnqueue (scheduling gates), score = ts (ms)
T:q:inflight              zset    popped pods. member ns/name, score = lease deadline (ms)
T:q:dead                  zset    dead-lettered pods, score = time dead-lettered (ms)
T:q:info                  hash    ns/name -> queue record, one line
                                  ``w|e|cy|a|d|u|p|ts|its|bo|pl|uid`` (lua/lib/queue_record.lua
                                  writes it; fields in distsched.queue_types.INFO_FIELDS)
T:q:cycle                 string  scheduling cycle counter (incremented per popped pod)
T:q:move_cycle            string  scheduling cycle of the last move request
T:q:epoch                 string  lease epoch counter (fencing tokens)
T:q:wake                  list    wake-up tokens for blocking pops
T:q:gang:of               hash    ns/name -> pod group "ns/name" of a gang member that went
                                  through the queue (pending or placed; gone with its delete)
T:q:gang:members          hash    pod group -> comma-joined keys of those members
T:q:gang:min              hash    pod group -> its minimum (minMember / gang minCount), set
                                  from its PodGroup by the handlers; absent: no PodGroup
T:q:gang:held             set     members in T:q:gated only because their group has no
                                  PodGroup or fewer members than its minimum (the queue's
                                  GangScheduling PreEnqueue, lua/lib/gang.lua)
T:q:explain               hash    ns/name -> JSON diagnosis of the last failed attempt
T:q:events                stream  the store events the queue's Python handlers must see (the
                                  workers' consumer group "queue-handlers" reads it): the
                                  entries of T:store:events, same id and fields, but for the
                                  moves a write script made itself (a pending pod's create
                                  enqueued, a reserved pod's bind with nothing unschedulable)
                                  and for kinds the handlers ignore
T:q:added                 hash    ``active`` -> pods the store's create script put into
                                  activeQ itself (a counter, cluster-wide)
T:q:profiles              hash    schedulerName -> how a pending pod of that profile enters
                                  the queue: ``n`` (no PreEnqueue plugin) and ``g`` (only
                                  SchedulingGates) for a pod without gates: the store's
                                  create script puts it into activeQ; otherwise (``p``, or a
                                  pod with gates) the workers' handlers run PreEnqueue
                                  (written by every worker at start)
T:store:rv                string  global resourceVersion, +1 per object written
T:store:obj:<Kind>        hash    key -> msgpack of the whole object, resourceVersion
                                  included; a bind does not rewrite it: while the meta has a
                                  bound_at, the blob is the pod before its binding and every
                                  reader applies the meta (codec.stored_object)
T:store:meta:<Kind>       hash    key -> ``<rv>|<node>|<bound_at>|<uid>``, e.g.
                                  ``42|node-7||3f0c..``: what the store's Lua checks
                                  preconditions against (string.match, no JSON). node: the
                                  pod's spec.nodeName ("" unbound / other kinds, never holds
                                  ``|``); bound_at: the binding's time (PodScheduled) while
                                  the blob predates it, else ""; uid last (may hold anything)
T:store:readers           hash    informer -> ``<rv>|<ms>``: how far it has read store:events
                                  and when it said so (store/trim.py trims below the slowest
                                  reader that reported within a minute)
T:store:kinds             hash    custom store kinds (``Kind.group``) ever created -> 1, so
                                  that `get certificates` finds ``Certificate.cert-manager.io``
                                  without a SCAN (written before the objects; never pruned)
T:store:epoch             string  random id of this store's history, set by the first write
                                  (a Redis that lost its data gets a new one; informers
                                  relist); every event carries it
T:store:events            stream  one entry per object write, id ``<rv>-0`` (contiguous: a
                                  gap means trimmed entries), capped by rv (``MINID ~``),
                                  trimmed below what its readers have read
                                  (T:store:readers); fields type
                                  (ADDED, MODIFIED, DELETED), kind, key, rv, epoch, obj
                                  (msgpack; DELETED: last state), old (MODIFIED of Pod and
                                  Node: previous), objmeta/oldmeta (the meta of that blob
                                  when it predates its pod's binding); pods also node, and
                                  nom (nominated node) when set. A binding: MODIFIED with
                                  node and bound (its time), no obj/old (readers rebuild it
                                  from their previous copy). A batch entry: the pod events
                                  of rvs first..rv that go to this stream alone, id
                                  ``<rv>-0``, fields type, kind, rv, epoch, first, batch
                                  (msgpack, one ``[key, field, value, ...]`` per rv; see
                                  lua/lib/storeevent.lua, codec.entry_events)
T:cache:node:<name>       hash    ledger node: ``alloc:<res>`` allocatable (cpu millicores,
                                  bytes, pods, extended units), ``live`` 1 (0: removed but
                                  still has bound pods, a ghost), ``topo:<topologyKey>`` its
                                  domains; its usage is in T:cache:usage
T:cache:capacity          hash    live node -> its allocatable "<res>=<amount>,..." (sorted):
                                  the copy of its ``alloc:`` fields that cache_reserve reads
                                  for a whole batch in one command (a node not there is read
                                  from its hash)
T:cache:ports:<name>      hash    used host ports: ``<proto>|<port>|<ip>`` -> holders, and
                                  ``<proto>|<port>`` -> holders over all ips
T:cache:nodepods:<name>   set     assumed and bound pods on the node (ns/name)
T:cache:nodes             set     names of every ledger node (live or ghost)
T:cache:pods              hash    ns/name -> ledger record, one line ``node token req ports
                                  ak uid``: ``req`` "res=n,...", ``ports`` "proto|port|ip,...",
                                  ``ak`` "topologyKey,..." of its own required anti-affinity
                                  (lua/lib/ledger_record.lua; never rewritten after creation)
T:cache:assumed           zset    assumed pods, score = assume deadline (ms); a record in
                                  T:cache:pods without an entry here is a bound pod
T:cache:domgen            hash    ``<topologyKey>=<value>`` -> generation of the domain (+1
                                  per reservation or release on a node of it), kept only for
                                  the keys in T:cache:topokeys
T:cache:topokeys          set     topology keys some constrained pod watches (registered by
                                  a worker before it reads their generations)
T:cache:aagen             hash    ``<topologyKey>=<value>`` -> anti-affinity generation
T:cache:aapods            hash    ns/name -> node, for pods with required anti-affinity
T:cache:feedver           string  change-feed version, +1 per script that changed usage
T:cache:feedlog           stream  one entry per feed version, id ``<version>-0``, fields
                                  node -> its usage record then (as T:cache:usage); the last
                                  ~512 versions are kept (lua/lib/ledger_record.lua)
T:cache:usage             hash    node -> its usage record "<gen>|<host-port fields in
                                  use>|<res>=<amount>,...", the only copy: ``gen`` +1 per
                                  reservation, release, update; amounts requested by
                                  assumed + bound pods (``+cpu``/``+memory``: scoring's
                                  non-zero extra); what workers mirror into their snapshots
                                  (lua/lib/ledger_record.lua)
T:cache:genfloor          string  the highest generation a deleted node's usage record had:
                                  a node new to T:cache:usage starts above it
T:permit:<ns/name>        list    Permit verdicts ("allow:<plugin>", "reject:<plugin>:<why>")
                                  for a waiting pod (kube's WaitingPod, across processes)
T:lock:<name>             string  short leader locks for periodic work (value: holder token)
T:ack                     string  counter written before each WAIT (distsched.replication)
========================  ======  ==========================================================

The binder pool's rq queue is ``distsched-bind-<scheduler>`` (rq's own ``rq:`` keys; see
:mod:`distsched.binder.jobs`). Modules that use these keys describe what they mean to
them; this table is the one place that lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SCHEDULER = "default"


@dataclass(frozen=True, slots=True)
class Keys:
    scheduler: str = DEFAULT_SCHEDULER

    @property
    def tag(self) -> str:
        return "{ds:" + self.scheduler + "}"

    def _k(self, *parts: str) -> str:
        return ":".join((self.tag, *parts))

    # --- scheduling queue -------------------------------------------------------------
    @property
    def active(self) -> str:
        return self._k("q", "active")

    @property
    def backoff(self) -> str:
        return self._k("q", "backoff")

    @property
    def unschedulable(self) -> str:
        return self._k("q", "unschedulable")

    @property
    def gated(self) -> str:
        return self._k("q", "gated")

    @property
    def inflight(self) -> str:
        return self._k("q", "inflight")

    @property
    def dead(self) -> str:
        return self._k("q", "dead")

    @property
    def info(self) -> str:
        return self._k("q", "info")

    @property
    def cycle(self) -> str:
        return self._k("q", "cycle")

    @property
    def move_cycle(self) -> str:
        return self._k("q", "move_cycle")

    @property
    def epoch(self) -> str:
        return self._k("q", "epoch")

    @property
    def wake(self) -> str:
        return self._k("q", "wake")

    @property
    def explain(self) -> str:
        return self._k("q", "explain")

    @property
    def recorded_events(self) -> str:
        """The scheduler's events (distsched/event_log.py), not the store's watch stream."""
        return self._k("events")

    @property
    def recorded_bindings(self) -> str:
        """The Scheduled events of the binder's batches, one entry per batch
        (distsched/event_log.py)."""
        return self._k("events", "scheduled")

    @property
    def gang_of(self) -> str:
        return self._k("q", "gang", "of")

    @property
    def gang_members(self) -> str:
        return self._k("q", "gang", "members")

    @property
    def gang_min(self) -> str:
        return self._k("q", "gang", "min")

    @property
    def gang_held(self) -> str:
        return self._k("q", "gang", "held")

    @property
    def queue_events(self) -> str:
        return self._k("q", "events")

    @property
    def profiles(self) -> str:
        return self._k("q", "profiles")

    @property
    def added(self) -> str:
        return self._k("q", "added")

    # --- store ("API server") ---------------------------------------------------------
    @property
    def resource_version(self) -> str:
        return self._k("store", "rv")

    def objects(self, kind: str) -> str:
        return self._k("store", "obj", kind)

    @property
    def events(self) -> str:
        return self._k("store", "events")

    def store_meta(self, kind: str) -> str:
        return self._k("store", "meta", kind)

    @property
    def stream_readers(self) -> str:
        return self._k("store", "readers")

    @property
    def store_epoch(self) -> str:
        return self._k("store", "epoch")

    @property
    def store_kinds(self) -> str:
        return self._k("store", "kinds")

    # --- cache ledger -----------------------------------------------------------------
    def ledger_node(self, name: str) -> str:
        return self._k("cache", "node", name)

    def ledger_ports(self, name: str) -> str:
        return self._k("cache", "ports", name)

    def ledger_node_pods(self, name: str) -> str:
        return self._k("cache", "nodepods", name)

    @property
    def ledger_nodes(self) -> str:
        return self._k("cache", "nodes")

    @property
    def ledger_pods(self) -> str:
        return self._k("cache", "pods")

    @property
    def ledger_assumed(self) -> str:
        return self._k("cache", "assumed")

    @property
    def ledger_domain_gen(self) -> str:
        return self._k("cache", "domgen")

    @property
    def ledger_topology_keys(self) -> str:
        return self._k("cache", "topokeys")

    @property
    def ledger_anti_affinity_gen(self) -> str:
        return self._k("cache", "aagen")

    @property
    def ledger_anti_affinity_pods(self) -> str:
        return self._k("cache", "aapods")

    @property
    def ledger_feed_version(self) -> str:
        return self._k("cache", "feedver")

    @property
    def ledger_feed(self) -> str:
        return self._k("cache", "feedlog")

    @property
    def ledger_usage(self) -> str:
        return self._k("cache", "usage")

    @property
    def ledger_capacity(self) -> str:
        return self._k("cache", "capacity")

    @property
    def ledger_generation_floor(self) -> str:
        return self._k("cache", "genfloor")

    def permit(self, pod_key: str) -> str:
        return self._k("permit", pod_key)

    # --- coordination -----------------------------------------------------------------
    def lock(self, name: str) -> str:
        return self._k("lock", name)

    @property
    def ack(self) -> str:
        """string: a counter written right before each replica WAIT, so that one WAIT on
        any connection covers every earlier write (see distsched.replication)."""
        return self._k("ack")

    @property
    def pattern(self) -> str:
        """A SCAN pattern matching every key of this scheduler (for tests and tooling)."""
        return "{ds:" + self.scheduler + "}:*"
