"""CPU a scheduling worker spends following the store's event stream, per pod.

Every worker's informer reads every pod's events (its creation and its binding) and feeds
its local cache: with W workers the cluster pays that W times. This replays the event
stream a finished ``distsched bench --redis-url URL`` run left in Redis through a real
worker's informer and handlers (GC tuned as in a worker), untimed up to ``--skip``
entries (the nodes and init pods), then timed to the end, and reports CPU µs per pod
(two entries per pod: created, bound), and per event of each kind (a pending pod
created, a binding) the CPU of its batch entry's delivery. Like a worker between batches
(:class:`distsched.gc_tuning.Settler`), it freezes what is alive after each read, so no
collection walks what earlier reads (or an earlier ``--repeat``) left.

    distsched bench --workload SchedulingBasic --nodes 5000 --init-pods 1000 --pods 20000 \\
        --workers 1 --binders 1 --redis-url redis://127.0.0.1:6391/0
    python -m distsched.bench.informer_replay --redis-url redis://127.0.0.1:6391/0 \\
        --skip 7000 [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis

from distsched import gc_tuning
from distsched.framework.profile import build_profiles, load_config
from distsched.keys import Keys
from distsched.store import Informer
from distsched.workers.schedule_one import SchedulingWorker


def replay(
    client: redis.Redis,
    keys: Keys,
    skip: int,
    by_type: dict[str, list[float]] | None = None,
) -> tuple[int, float]:
    """(entries timed, CPU seconds) of one replay by a fresh worker's informer. With
    ``by_type``, also the events delivered and their CPU seconds by event type
    (``ADDED``: for pods, pending pods created; ``MODIFIED``: bindings), timed around
    each entry's delivery (the stream read itself is in none)."""
    worker = SchedulingWorker(client, keys, profiles=build_profiles(load_config(None)))
    informer = worker.informer
    if by_type is not None:
        _time_by_type(informer, by_type)
    informer._need_relist = False  # read the stream from its start, as a tail would
    end = int(client.get(keys.resource_version) or 0)
    informer._batch = 1  # an entry at a time: a batch entry carries many rvs
    while informer.resource_version < min(skip, end):
        if not informer.poll_once(0):
            break
    informer._batch = 1000
    if by_type is not None:
        by_type.clear()  # what the untimed part delivered
    settler = gc_tuning.Settler()  # between reads, as a worker's loop between turns
    settler.settle()
    start_rv, started = informer.resource_version, time.process_time()
    while informer.resource_version < end:
        if not informer.poll_once(0):
            break
        settler.settle()
    return informer.resource_version - start_rv, time.process_time() - started


def _time_by_type(informer: Informer, by_type: dict[str, list[float]]) -> None:
    """Charge each stream entry's delivery (a batch entry, or an entry of one event) to
    its event type: the informer's two entry points are wrapped, and only the outer one
    counts when one calls the other (an odd item of a batch goes through ``_apply``)."""
    depth = [0]

    def wrap(deliver: Callable[..., int]) -> Callable[..., int]:
        def timed(fields: Mapping[bytes, bytes], *args: Any) -> int:
            depth[0] += 1
            started = time.process_time()
            try:
                delivered = deliver(fields, *args)
            finally:
                depth[0] -= 1
            if not depth[0]:
                counts = by_type.setdefault(fields[b"type"].decode(), [0, 0.0])
                counts[0] += delivered
                counts[1] += time.process_time() - started
            return delivered

        return timed

    for name in ("_apply", "_deliver_pod_batch"):
        setattr(informer, name, wrap(getattr(informer, name)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--scheduler", default="default")
    parser.add_argument("--skip", type=int, default=0, help="entries replayed untimed first")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    client = redis.Redis.from_url(args.redis_url)
    gc_tuning.tune()
    gc.freeze()
    for _ in range(args.repeat):
        by_type: dict[str, list[float]] = {}
        entries, cpu_s = replay(client, Keys(args.scheduler), args.skip, by_type)
        if entries < 2:
            raise SystemExit("nothing to replay past --skip: run a bench with --redis-url first")
        pods = entries / 2
        kinds = ", ".join(
            f"{etype} {spent / count * 1e6:.2f} us per event"
            for etype, (count, spent) in sorted(by_type.items())
            if count
        )
        print(f"{pods:.0f} pods: {cpu_s / pods * 1e6:.2f} us CPU per pod ({kinds})")


if __name__ == "__main__":
    main()
