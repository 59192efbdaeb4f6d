"""Cost of replication, measured in one run: ``distsched bench`` against a standalone
redis-server and through a Sentinel URL (the same binary as primary + one replica, with
``--min-replicas-ack 1``), alternating so that the shared machine's noise hits both.

    python -m tests.reliability.bench_replication --rounds 2 --nodes 500 --pods 2000

Prints one JSON line per bench run and a summary line with the ratio of the medians.
The servers are the bundled valkey-server by default (``--binary`` to change): with
redis-server 7.0, XREADGROUP on an empty stream does not register its consumer, and the
bench's wait for the workers to join the event stream never ends.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from distsched.embedded import server_binary
from tests.reliability.sentinels import SentinelCluster


def bench(url: str, args: argparse.Namespace, scheduler: str, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "distsched", "bench", "--redis-url", url, "-o", "json", *extra]
    cmd += ["--workload", args.workload, "--nodes", str(args.nodes), "--pods", str(args.pods)]
    cmd += ["--scheduler", scheduler]
    if args.init_pods is not None:
        cmd += ["--init-pods", str(args.init_pods)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"bench failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workload", default="SchedulingBasic")
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--init-pods", type=int, default=None)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--binary", default=str(server_binary()))
    parser.add_argument("--no-wait", action="store_true", help="also: Sentinel, no WAIT")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        standalone = SentinelCluster(
            root / "standalone", replicas=0, sentinel_count=0, binary=args.binary
        )
        replicated = SentinelCluster(root / "ha", binary=args.binary)
        try:
            standalone.start()
            replicated.start()
            setups = {
                "standalone": (f"redis://127.0.0.1:{standalone.data[0].port}/0", ()),
                "sentinel": (replicated.url, ()),
            }
            if args.no_wait:  # replicated, but nothing waits for the replica
                setups["sentinel-no-wait"] = (replicated.url, ("--min-replicas-ack", "0"))
            figures: dict[str, list[float]] = {name: [] for name in setups}
            for i in range(args.rounds):
                for n, (name, (url, extra)) in enumerate(setups.items()):
                    result = bench(url, args, f"r{i}s{n}", *extra)
                    average = result["throughput"]["average"]
                    figures[name].append(average)
                    line = {"setup": name, "round": i, "pods_per_s": average}
                    line["outcome"] = result["outcome"]
                    line["redis_cpu_us_per_pod"] = result["redis_cpu_us_per_pod"]
                    # CPU per pod moves far less than throughput on a shared machine.
                    line["cpu_s_per_1000_pods"] = result["cpu_seconds_per_1000_pods"]
                    print(json.dumps(line), flush=True)
        finally:
            standalone.stop()
            replicated.stop()
    med = {name: statistics.median(values) for name, values in figures.items()}
    ratio = med["sentinel"] / med["standalone"] if med["standalone"] else 0.0
    print(json.dumps({"median_pods_per_s": med, "sentinel_over_standalone": round(ratio, 3)}))


if __name__ == "__main__":
    main()
