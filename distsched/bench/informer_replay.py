"""CPU a scheduling worker spends following the store's event stream, per pod.

Every worker's informer reads every pod's events (its creation and its binding) and feeds
its local cache: with W workers the cluster pays that W times. This replays the event
stream a finished ``distsched bench --redis-url URL`` run left in Redis through a real
worker's informer and handlers (GC tuned as in a worker), untimed up to ``--skip``
entries (the nodes and init pods), then timed to the end, and reports CPU µs per pod
(two entries per pod: created, bound). Like a worker between batches
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

import redis

from distsched import gc_tuning
from distsched.framework.profile import build_profiles, load_config
from distsched.keys import Keys
from distsched.workers.schedule_one import SchedulingWorker


def replay(client: redis.Redis, keys: Keys, skip: int) -> tuple[int, float]:
    """(entries timed, CPU seconds) of one replay by a fresh worker's informer."""
    worker = SchedulingWorker(client, keys, profiles=build_profiles(load_config(None)))
    informer = worker.informer
    informer._need_relist = False  # read the stream from its start, as a tail would
    end = int(client.get(keys.resource_version) or 0)
    informer._batch = 1  # an entry at a time: a batch entry carries many rvs
    while informer.resource_version < min(skip, end):
        if not informer.poll_once(0):
            break
    informer._batch = 1000
    settler = gc_tuning.Settler()  # between reads, as a worker's loop between turns
    settler.settle()
    start_rv, started = informer.resource_version, time.process_time()
    while informer.resource_version < end:
        if not informer.poll_once(0):
            break
        settler.settle()
    return informer.resource_version - start_rv, time.process_time() - started


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
        entries, cpu_s = replay(client, Keys(args.scheduler), args.skip)
        if entries < 2:
            raise SystemExit("nothing to replay past --skip: run a bench with --redis-url first")
        pods = entries / 2
        print(f"{pods:.0f} pods: {cpu_s / pods * 1e6:.2f} us CPU per pod")


if __name__ == "__main__":
    main()
