"""CPU a scheduling worker spends mirroring the ledger's change feed, per node record.

Every reservation, release or binding of a node's pods rewrites that node's usage record
and appends it to the ledger's change feed; every worker reads the feed at each turn
(``ClusterView.refresh_from_ledger``), so with W workers each record is parsed W times.
This re-reads the feed a finished ``distsched bench --redis-url URL`` run left in Redis
through a real worker's view: its last ``--versions`` entries at once (a worker that
missed that many reservation batches), each read ``--repeat`` times, reporting the median
CPU µs per call and per node record. The feed log keeps its last ~512 versions; a read
further back than 256 takes the whole usage hash instead, as a worker that far behind
would.

    distsched bench --workload SchedulingBasic --nodes 5000 --init-pods 1000 --pods 30000 \\
        --workers 4 --binders 1 --redis-url redis://127.0.0.1:6391/0
    python -m distsched.bench.feed_replay --redis-url redis://127.0.0.1:6391/0 \\
        [--versions 1,4,16] [--repeat 30]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Sequence

import redis

from distsched import gc_tuning
from distsched.framework.profile import build_profiles, load_config
from distsched.keys import Keys
from distsched.workers.schedule_one import SchedulingWorker


def replay(
    client: redis.Redis, keys: Keys, versions: Sequence[int], repeat: int
) -> list[tuple[int, int, float]]:
    """(versions read, node records, median CPU seconds per read) for each of
    ``versions``: a fresh worker's view, its nodes synced from the store, reads the feed's
    last that many versions ``repeat`` times (the collector off while it reads)."""
    worker = SchedulingWorker(client, keys, profiles=build_profiles(load_config(None)))
    informer = worker.informer
    while not informer.has_synced:
        informer.poll_once(0)
    view = worker.view
    current = int(client.get(keys.ledger_feed_version) or 0)
    out = []
    for back in versions:
        if back < 1 or back > current:
            raise ValueError(f"the feed has {current} versions, not {back} to read back")
        spent, records = [], 0
        for _ in range(repeat):
            view.feed_version = current - back
            gc.disable()
            started = time.process_time()
            records = view.refresh_from_ledger()
            spent.append(time.process_time() - started)
            gc.enable()
        out.append((back, records, statistics.median(spent)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--scheduler", default="default")
    parser.add_argument("--versions", default="1,4,16", help="comma-separated")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    client = redis.Redis.from_url(args.redis_url)
    gc_tuning.tune()
    versions = [int(v) for v in args.versions.split(",")]
    try:
        results = replay(client, Keys(args.scheduler), versions, args.repeat)
    except ValueError as exc:
        raise SystemExit(f"{exc}: run a bench with --redis-url first") from None
    for back, records, cpu_s in results:
        per_node = cpu_s / records * 1e6 if records else 0.0
        print(
            f"last {back} version(s): {records} node records, "
            f"{cpu_s * 1e6:.1f} us CPU per read, {per_node:.2f} us per record"
        )


if __name__ == "__main__":
    main()
