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
T:q:info                  hash    ns/name -> JSON of the queued pod's info (see queue_types)
T:q:cycle                 string  scheduling cycle counter (incremented per popped pod)
T:q:move_cycle            string  scheduling cycle of the last move request
T:q:epoch                 string  lease epoch counter (fencing tokens)
T:q:wake                  list    wake-up tokens for blocking pops
T:q:explain               hash    ns/name -> JSON diagnosis of the last failed attempt
T:store:rv                string  global resourceVersion
T:store:obj:<Kind>        hash    key -> msgpack object
T:store:meta:<Kind>       hash    key -> JSON {"rv", "uid", "node"} read by the store's Lua
T:store:epoch             string  random id of this store's history (changes when Redis
                                  loses the data); every event carries it
T:store:events            stream  ADDED / MODIFIED / DELETED events
T:lock:<name>             string  short leader locks for periodic work
T:ack                     string  counter written before each WAIT (distsched.replication)
========================  ======  ==========================================================
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
        """hash ns/name -> JSON of the last failed attempt's diagnosis (distsched explain)."""
        return self._k("q", "explain")

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
    def store_epoch(self) -> str:
        return self._k("store", "epoch")

    # --- cache ledger -----------------------------------------------------------------
    def cache(self, *parts: str) -> str:
        return self._k("cache", *parts)

    # --- binder -----------------------------------------------------------------------
    def binder(self, *parts: str) -> str:
        return self._k("bind", *parts)

    def permit(self, pod_key: str) -> str:
        """list of Permit verdicts ("allow:<plugin>", "reject:<plugin>:<why>") for a
        waiting pod (kube's WaitingPod, across processes)."""
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
