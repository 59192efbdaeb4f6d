"""Four real processes race to reserve, bind, release, delete and reap on 20 small nodes.

Each process plays a scheduling worker plus binder: it reads the ledger (generations first,
then the anti-affinity pods, as a snapshot must), decides for random inflight pods, and
reserves in batches. "anti" pods have required anti-affinity (per node) against "web" pods
and against each other; "web" pods have no constraints of their own (the symmetric case).
While they run, the test process samples the ledger; afterwards the ledger must agree with
its pods, and no node may be over allocatable, share a host port, or host an anti pod next
to a web or another anti pod.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import redis

from distsched.cache.ledger import (
    Decision,
    Ledger,
    LedgerConfig,
    NodeState,
    Rejected,
    Stale,
)
from distsched.cache.ledger_types import domain
from distsched.clock import SYSTEM_CLOCK
from distsched.keys import Keys
from distsched.model import LABEL_HOSTNAME
from distsched.queue_types import QueueConfig, decode_info
from tests.cache.ledger_helpers import ZONE, pop_like_queue

NODES = [f"node-{i:02d}" for i in range(20)]
NODE_SIZE = {"cpu": 2000, "memory": 4 << 30, "pods": 8}
PODS = 400
WORKERS = 4
BATCHES_PER_WORKER = 150
IPS = ("", "10.0.0.1", "10.0.0.2")


def kind_of(pod_key: str) -> str:
    i = int(pod_key.rsplit("-", 1)[1])
    return "anti" if i % 10 == 0 else "web" if i % 10 < 5 else "plain"


def requests_of(pod_key: str) -> tuple[dict[str, int], list[tuple[str, str, int]]]:
    rng = random.Random(pod_key)
    req = {"cpu": rng.randrange(100, 900, 50), "memory": rng.randrange(1, 16) << 27}
    ports = [(rng.choice(IPS), "TCP", 8080)] if rng.random() < 0.3 else []
    return req, ports


def fits(state: NodeState, req: dict[str, int], ports: list[tuple[str, str, int]]) -> bool:
    """The worker's own resource and host-port check on its (possibly stale) snapshot."""
    want = {**req, "pods": 1}
    if any(state.requested.get(r, 0) + v > state.allocatable.get(r, 0) for r, v in want.items()):
        return False
    used = {port for _, _, port in state.ports}
    return not any(port in used for _, _, port in ports)


def requeue(r: redis.Redis, keys: Keys, pod_key: str) -> None:
    """What a queue add + pop leaves: a new lease epoch, info w=inflight, inflight entry."""
    epoch = int(r.incr(keys.epoch))
    pop_like_queue(r, keys, pod_key, epoch=epoch, now_ms=SYSTEM_CLOCK.now_ms())


def worker(url: str, scheduler: str, seed: int) -> dict[str, int]:
    r = redis.Redis.from_url(url)
    keys = Keys(scheduler)
    ledger = Ledger(
        r,
        keys,
        SYSTEM_CLOCK,
        LedgerConfig(assume_ttl_ms=300),
        queue_config=QueueConfig(initial_backoff_ms=1),
    )
    # The anti pods' hostname checks: a worker registers the key before reading generations.
    ledger.watch_topology_keys([LABEL_HOSTNAME])
    rng = random.Random(seed)
    counts = dict.fromkeys(
        ("reserved", "rejected", "anti-affinity", "stale", "bound", "released", "reaped"), 0
    )
    bound: list[str] = []
    while not r.exists(keys.lock("test-go")):
        time.sleep(0.001)
    for n in range(BATCHES_PER_WORKER):
        states = ledger.node_state(NODES)  # generations first ...
        anti_nodes = set(ledger.anti_affinity_pods().values())  # ... then what they cover
        # workers contend for the same pods: pick among the 16 oldest leases
        picked = [k.decode() for k in r.zrange(keys.inflight, 0, 15)]
        picked = rng.sample(picked, min(8, len(picked)))
        infos = r.hmget(keys.info, picked) if picked else []
        decisions = []
        for pod_key, raw in zip(picked, infos, strict=True):
            if raw is None:
                continue
            info = decode_info(pod_key, raw)
            kind = kind_of(pod_key)
            req, ports = requests_of(pod_key)
            fitting = [n for n in NODES if fits(states[n], req, ports)]
            if kind == "anti":
                candidates = [
                    n
                    for n in fitting
                    if n not in anti_nodes
                    and not any(kind_of(p) in ("anti", "web") for p in states[n].pods)
                ]
            elif kind == "web":
                candidates = [n for n in fitting if n not in anti_nodes]
            else:
                candidates = fitting
            if not candidates:
                continue
            node = rng.choice(candidates)
            host = domain(LABEL_HOSTNAME, node)
            decisions.append(
                Decision(
                    pod_key=pod_key,
                    uid=info["uid"],
                    epoch=info["e"],
                    node=node,
                    requests=req,
                    host_ports=ports,
                    domain_checks={host: states[node].domain_gens[host]} if kind == "anti" else {},
                    anti_affinity_gen=states[node].anti_affinity_gen,
                    anti_affinity_keys=[LABEL_HOSTNAME] if kind == "anti" else [],
                )
            )
        for d, result in zip(decisions, ledger.reserve_batch(decisions), strict=True):
            if isinstance(result, Stale):
                counts["stale"] += 1
                continue
            if isinstance(result, Rejected):
                counts["anti-affinity" if "anti-affinity" in result.reason else "rejected"] += 1
                continue
            counts["reserved"] += 1
            roll = rng.random()
            if roll < 0.5 and ledger.confirm_bound(d.pod_key, result.token):
                counts["bound"] += 1
                bound.append(d.pod_key)
            elif roll < 0.8 and ledger.release(d.pod_key, token=result.token):
                counts["released"] += 1
                requeue(r, keys, d.pod_key)
            # else: leave it assumed, as a binder that died would; the reaper takes it back
        if bound and rng.random() < 0.8:
            gone = bound.pop(rng.randrange(len(bound)))
            if ledger.pod_deleted(gone):
                requeue(r, keys, gone)
        if n % 5 == 0:
            counts["reaped"] += len(ledger.reap_expired_assumed())
            for key, _ in r.zpopmin(keys.backoff, 8):  # the backoff flush + pop, in short
                requeue(r, keys, key.decode())
    r.close()
    return counts


def hard_constraint_violations(r: redis.Redis, ledger: Ledger) -> list[str]:
    problems = []
    states = ledger.node_state(NODES)
    with r.pipeline(transaction=True) as pipe:
        for name in NODES:
            pipe.hgetall(ledger.node_keys(name)[1])
        port_hashes = pipe.execute()
    for name, ports in zip(NODES, port_hashes, strict=True):
        st = states[name]
        for res, amount in st.requested.items():
            if amount > st.allocatable.get(res, 0):
                problems.append(f"{name} is over allocatable {res}: {amount}")
        fields = {k.decode(): int(v) for k, v in ports.items()}
        for field, holders in fields.items():
            proto_port = "|".join(field.split("|")[:2])
            if holders > 1 and field.count("|") == 2:
                problems.append(f"{name}: {field} held {holders} times")
            if field.count("|") == 1 and f"{field}|0.0.0.0" in fields and holders > 1:
                problems.append(f"{name}: wildcard {proto_port} shared")
        kinds = [kind_of(p) for p in st.pods]
        if "anti" in kinds and kinds.count("anti") + kinds.count("web") > 1:
            problems.append(f"{name} breaks anti-affinity: {st.pods}")
    return problems


def test_four_processes_never_overcommit(r: redis.Redis, redis_url: str) -> None:
    keys = Keys("race")
    ledger = Ledger(r, keys, SYSTEM_CLOCK)
    for i, name in enumerate(NODES):
        ledger.set_node(name, NODE_SIZE, {ZONE: "ab"[i % 2]})
    pod_keys = [f"ns/pod-{i}" for i in range(PODS)]
    for pod_key in pod_keys:
        requeue(r, keys, pod_key)

    ctx = get_context("fork")
    with ProcessPoolExecutor(WORKERS, mp_context=ctx) as pool:
        futures = [pool.submit(worker, redis_url, "race", seed) for seed in range(WORKERS)]
        r.set(keys.lock("test-go"), 1)
        samples = 0
        while not all(f.done() for f in futures):
            assert hard_constraint_violations(r, ledger) == []
            samples += 1
        counts = [f.result() for f in futures]

    total = {k: sum(c[k] for c in counts) for k in counts[0]}
    # the run raced for real: reservations, conflicts and lost fencing races all happened
    assert total["reserved"] > 300 and total["rejected"] > 0 and total["stale"] > 0, total
    assert total["bound"] > 0 and total["released"] > 0 and total["reaped"] > 0, total
    assert samples > 5
    assert hard_constraint_violations(r, ledger) == []
    assert ledger.check_consistency() == []

    # every pod is in exactly one place, and the queue info agrees
    recorded = {k.decode() for k in r.hkeys(ledger.pods_key)}
    assumed = set(ledger.assumed_pods())
    inflight = {k.decode() for k in r.zrange(keys.inflight, 0, -1)}
    backoff = {k.decode() for k in r.zrange(keys.backoff, 0, -1)}
    assert recorded | inflight | backoff == set(pod_keys)
    assert len(recorded) + len(inflight) + len(backoff) == PODS
    for pod_key in pod_keys:
        raw = r.hget(keys.info, pod_key)
        where = decode_info(pod_key, raw)["w"] if raw else None
        expected = (
            "assumed"
            if pod_key in assumed
            else None
            if pod_key in recorded
            else "inflight"
            if pod_key in inflight
            else "backoff"
        )
        assert where == expected, pod_key
