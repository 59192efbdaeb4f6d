"""Redis instructions per SchedulingBasic pod, counted by valgrind: a figure that does not
move with the machine.

Redis CPU per pod (item 3 of issue 23) is the figure to bring down, but on a shared
2-core VM a whole ``distsched bench`` run's Redis µs per pod moves by ±20 % between runs
minutes apart, more than most changes to the scripts. Instructions do not: this runs a
``redis-server`` under ``valgrind --tool=callgrind`` (on a free port, no persistence),
runs ``distsched bench --workload SchedulingBasic --workers 1`` against it twice, with
``--pods`` and with three times as many, and reports the instructions the server ran
per pod of the difference (what set-up and the nodes cost cancels out). The same
command repeats within a fraction of a percent on most days (but by up to ±1.5 % when the
VM is slow: the batches the bench's worker makes under a server 30 times slower depend on
its speed), so before/after pairs, alternating and each run from inside its own
checkout, compare two versions of the scripts:

    python -m distsched.bench.redis_instructions [--nodes 2000] [--pods 2000]

It needs ``valgrind`` and ``redis-server`` on PATH (``--redis-server`` to name another,
e.g. the embedded valkey-server, which gets the allocator ``distsched up`` would preload
into it: see ``distsched.embedded.malloc_preload``) and takes about a minute: the server
runs some 30 times slower under valgrind. Only the count is meaningful; the bench's own
figures from such a run are not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from distsched.embedded import free_port, malloc_preload, preloaded_env


def count(server: str, *, nodes: int, pods: int, preload: str | None = None) -> int:
    """Instructions a callgrind-run ``server`` executed, from start to shutdown, serving
    one SchedulingBasic bench of ``pods`` pods on ``nodes`` nodes, with the allocator
    library ``preload`` preloaded (main passes the one the embedded server would get)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="distsched-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        proc = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                server,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                tmp,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=preloaded_env(preload),
        )
        client = redis.Redis(port=port)
        try:
            _wait_for(client, proc)
            bench = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "distsched",
                    "bench",
                    "--redis-url",
                    f"redis://127.0.0.1:{port}/0",
                    "--workload",
                    "SchedulingBasic",
                    "--nodes",
                    str(nodes),
                    "--init-pods",
                    "0",
                    "--pods",
                    str(pods),
                    "--workers",
                    "1",
                    "--binders",
                    "1",
                    "-o",
                    "json",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            report = json.loads(bench.stdout) if bench.returncode == 0 else {}
            if report.get("bound") != pods:
                raise SystemExit(f"the bench did not bind every pod: {bench.stderr[-500:]}")
        finally:
            # The total is written at exit: shut the server down whatever happened.
            with contextlib.suppress(redis.ConnectionError):  # the shutdown closes it
                client.shutdown(nosave=True)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        return _total(out)


def _wait_for(client: redis.Redis, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("redis-server under valgrind exited at start")
        try:
            client.ping()
            return
        except redis.ConnectionError:
            time.sleep(0.3)
    raise SystemExit("redis-server under valgrind did not answer within 60 s")


def _total(out: Path) -> int:
    for line in out.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise SystemExit(f"no instruction total in {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--redis-server", default="redis-server")
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = parser.parse_args()
    for tool in ("valgrind", args.redis_server):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not on PATH")
    preload = malloc_preload(Path(shutil.which(args.redis_server) or args.redis_server))
    small = count(args.redis_server, nodes=args.nodes, pods=args.pods, preload=preload)
    large = count(args.redis_server, nodes=args.nodes, pods=3 * args.pods, preload=preload)
    per_pod = (large - small) / (2 * args.pods)
    if args.output == "json":
        report = {"instructions_per_pod": round(per_pod), "runs": [small, large]}
        print(json.dumps(report | {"preload": preload}))
    else:
        allocator = f" (allocator preloaded: {preload})" if preload else ""
        print(f"{per_pod / 1000:.1f}k Redis instructions per SchedulingBasic pod{allocator}")


if __name__ == "__main__":
    main()
