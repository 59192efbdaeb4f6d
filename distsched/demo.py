"""`distsched up --demo`: a small cluster and a few hundred pods, scheduled live."""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

import redis

from distsched.keys import Keys
from distsched.output import print_table, progress_bar
from distsched.store import Store

ZONES = ("zone-a", "zone-b", "zone-c")


def demo_nodes(count: int = 20) -> list[dict[str, Any]]:
    nodes = []
    for i in range(count):
        zone = ZONES[i % len(ZONES)]
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"node-{i:02d}",
                "labels": {
                    "kubernetes.io/hostname": f"node-{i:02d}",
                    "topology.kubernetes.io/zone": zone,
                    "disktype": "ssd" if i % 2 == 0 else "hdd",
                },
            },
            "spec": {},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "30"}},
        }
        if i % 10 == 9:
            node["spec"]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
        nodes.append(node)
    return nodes


def demo_pods(count: int = 300, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pods = []
    for i in range(count):
        spec: dict[str, Any] = {
            "priority": rng.choice((0, 0, 0, 100, 1000)),
            "containers": [
                {
                    "name": "app",
                    "image": "nginx:1.27",
                    "resources": {
                        "requests": {
                            "cpu": rng.choice(("100m", "250m", "500m")),
                            "memory": rng.choice(("128Mi", "256Mi", "512Mi")),
                        }
                    },
                }
            ],
        }
        if i % 5 == 0:
            spec["nodeSelector"] = {"disktype": "ssd"}
        if i % 17 == 0:
            spec["tolerations"] = [
                {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
            ]
        app = f"web-{i % 10}"
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"demo-{i:03d}", "namespace": "demo", "labels": {"app": app}},
                "spec": spec,
            }
        )
    # One pod nothing can hold: `distsched explain pod too-big -n demo` says why.
    pods.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "too-big", "namespace": "demo"},
            "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "64"}}}]},
        }
    )
    return pods


def run_demo(client: redis.Redis, keys: Keys, *, timeout_s: float = 120.0) -> bool:
    store = Store(client, keys)
    nodes, pods = demo_nodes(), demo_pods()
    store.create_many(nodes)
    started = time.monotonic()
    store.create_many(pods)
    schedulable = len(pods) - 1
    bound = 0
    # The bar goes to stderr, the summary to stdout (`up --demo > summary.txt` keeps it).
    with progress_bar("scheduling") as progress:
        task = progress.add_task("pods", total=schedulable)
        while time.monotonic() - started < timeout_s:
            items, _ = store.list("Pod", namespace="demo")
            bound = sum(1 for p in items if p.get("spec", {}).get("nodeName"))
            progress.update(task, completed=bound)
            if bound >= schedulable:
                break
            time.sleep(0.2)
    elapsed = time.monotonic() - started
    items, _ = store.list("Pod", namespace="demo")
    per_node = Counter(p["spec"]["nodeName"] for p in items if p.get("spec", {}).get("nodeName"))
    rows = [(name, per_node.get(name, 0)) for name in sorted(n["metadata"]["name"] for n in nodes)]
    print_table(None, ["NODE", "PODS"], rows)
    print(
        f"{bound}/{schedulable} schedulable pods bound in {elapsed:.1f}s "
        f"({bound / elapsed:.0f} pods/s); demo/too-big stays pending "
        "(try `distsched explain pod too-big -n demo`)",
        flush=True,
    )
    return bound >= schedulable
