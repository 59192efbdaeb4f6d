"""Helpers for the ledger tests: put pods into inflight the way the queue's pop does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis

from distsched.cache.ledger import Decision, Ledger, LedgerConfig
from distsched.clock import Clock
from distsched.keys import Keys
from distsched.model import LABEL_HOSTNAME, HostPort
from distsched.queue_types import QueueConfig, decode_info, encode_info

ZONE = "topology.kubernetes.io/zone"
SMALL = {"cpu": 1000, "memory": 1 << 30, "pods": 10}


def make_ledger(
    r: redis.Redis,
    keys: Keys,
    clock: Clock,
    *,
    watch: Sequence[str] = (ZONE, LABEL_HOSTNAME),
    **config: int,
) -> Ledger:
    """A ledger that keeps generations for the ``watch`` topology keys (as workers make it
    when they decide constrained pods); ``initial_backoff_ms``/``max_backoff_ms`` go to the
    queue's config (the one backoff the reaper requeues with), the rest to the ledger's."""
    backoff = {k: config.pop(k) for k in ("initial_backoff_ms", "max_backoff_ms") if k in config}
    ledger = Ledger(r, keys, clock, LedgerConfig(**config), queue_config=QueueConfig(**backoff))
    ledger.watch_topology_keys(watch)
    return ledger


def pop_like_queue(
    r: redis.Redis,
    keys: Keys,
    pod_key: str,
    *,
    epoch: int,
    now_ms: int,
    uid: str | None = None,
    priority: int = 0,
    attempts: int = 1,
    lease_ms: int = 10_000,
) -> None:
    """Write what queue_pop leaves behind for a popped pod: info with w="inflight" and
    e=<epoch>, and an inflight entry scored by the lease deadline."""
    info = {
        "uid": uid or f"uid-{pod_key}",
        "p": priority,
        "ts": now_ms - 5,
        "its": now_ms - 5,
        "a": attempts,
        "w": "inflight",
        "pl": "",
        "cy": epoch,
        "e": epoch,
        "d": 1,
        "bo": 0,
    }
    r.hset(keys.info, pod_key, encode_info(info))
    r.zadd(keys.inflight, {pod_key: now_ms + lease_ms})


def info_of(r: redis.Redis, keys: Keys, pod_key: str) -> dict[str, Any] | None:
    raw = r.hget(keys.info, pod_key)
    return None if raw is None else decode_info(pod_key, raw)


def decision(
    pod_key: str,
    node: str,
    *,
    epoch: int = 1,
    uid: str | None = None,
    requests: Mapping[str, int] | None = None,
    ports: Sequence[HostPort] = (),
    domain_checks: Mapping[str, int] | None = None,
    anti_affinity_gen: int = 0,
    anti_affinity_keys: Sequence[str] = (),
) -> Decision:
    return Decision(
        pod_key=pod_key,
        uid=uid or f"uid-{pod_key}",
        epoch=epoch,
        node=node,
        requests=requests if requests is not None else {"cpu": 100, "memory": 1 << 20},
        host_ports=ports,
        domain_checks=domain_checks or {},
        anti_affinity_gen=anti_affinity_gen,
        anti_affinity_keys=anti_affinity_keys,
    )


def snapshot_db(r: redis.Redis) -> dict[bytes, Any]:
    """Every key of the database with its value, to prove that nothing was written."""
    out: dict[bytes, Any] = {}
    for key in r.scan_iter():
        kind = r.type(key)
        if kind == b"hash":
            out[key] = r.hgetall(key)
        elif kind == b"zset":
            out[key] = r.zrange(key, 0, -1, withscores=True)
        elif kind == b"set":
            out[key] = r.smembers(key)
        elif kind == b"list":
            out[key] = r.lrange(key, 0, -1)
        elif kind == b"stream":
            out[key] = r.xrange(key)
        else:
            out[key] = r.get(key)
    return out


def bound_in_store(r: redis.Redis, keys: Keys, pod_key: str, uid: str, node: str) -> None:
    """Write the store meta of a pod bound to ``node`` (what the ledger checks before it
    records a bound pod: the store must have it bound there)."""
    r.hset(keys.store_meta("Pod"), pod_key, f"1|{node}||{uid}")


def add_bound(
    ledger: Ledger,
    r: redis.Redis,
    keys: Keys,
    pod_key: str,
    uid: str,
    node: str,
    req: Mapping[str, int],
    ports: Sequence[Any] = (),
    **options: Any,
) -> str:
    """``Ledger.add_bound_pod`` for a pod the store has bound there (written first)."""
    bound_in_store(r, keys, pod_key, uid, node)
    return ledger.add_bound_pod(pod_key, uid, node, req, ports, **options)
