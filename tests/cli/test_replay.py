"""`distsched replay` on a dump made by `distsched get pods,nodes -o json` of a running
distsched (kube's List shape): bound pods stay, pending ones land as kube would place
them, the report says where and why not; the checker's invariants hold afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import redis

from distsched.bench.checker import check
from distsched.connection import RedisOptions
from distsched.keys import Keys
from distsched.model import MAX_MANIFEST_BYTES
from distsched.replay import Report, load_dump, replay
from distsched.store import Store
from tests.cli.manifests import invoke
from tests.support.dumps import api_server_dump
from tests.support.objects import ZONE, node, pod

DATA = Path(__file__).parent / "data"

ANTI = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"app": "web"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}
SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "db"}},
    }
]


def make_dump(r: redis.Redis, redis_url: str, path: Path) -> None:
    """A small running cluster in deployment "test", dumped with `get pods,nodes -o json`."""
    store = Store(r, Keys("test"))
    store.create_many(
        [node(f"n{i}", cpu="4", labels={ZONE: f"z{i % 2}"}) for i in range(4)]
        + [pod("web-0", cpu="1", labels={"app": "web"}, affinity=ANTI)]
        + [pod("db-0", cpu="1", labels={"app": "db"}, topologySpreadConstraints=SPREAD)]
        + [pod(f"web-{i}", cpu="1", labels={"app": "web"}, affinity=ANTI) for i in range(1, 6)]
        + [pod(f"db-{i}", cpu="1", labels={"app": "db"}, topologySpreadConstraints=SPREAD)
           for i in range(1, 4)]
        + [pod("huge", cpu="6")]
    )  # fmt: skip
    store.bind("default/web-0", None, "n0")
    store.bind("default/db-0", None, "n0")
    result = invoke(redis_url, "get", "pods,nodes", "-o", "json")
    assert result.exit_code == 0, result.output
    path.write_text(result.stdout)


def test_replay_keeps_bound_pods_and_places_pending_ones_like_kube(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    dump = tmp_path / "dump.json"
    make_dump(r, redis_url, dump)
    keys = Keys("replay-test")
    report = replay(
        load_dump([str(dump)], pending_only=True),
        RedisOptions(url=redis_url),
        keys=keys,
        keep=True,
        log_dir=tmp_path / "logs",
    )
    out = report.to_json()
    assert out["nodes"] == 4
    assert out["pods"] == {
        "kept": 2, "pending": 9, "scheduled": 6, "unschedulable": 3, "preempted": 0,
    }  # fmt: skip
    placed = out["placements"]
    store = Store(r, keys)
    assert store.get("Pod", "default/web-0")["spec"]["nodeName"] == "n0"  # kept
    web_hosts = [placed[f"default/web-{i}"] for i in range(1, 6) if f"default/web-{i}" in placed]
    # Anti-affinity per host: n0 has web-0, so three more webs fit, two do not.
    assert sorted(web_hosts) == ["n1", "n2", "n3"]
    zones = [int(placed[f"default/db-{i}"][1]) % 2 for i in range(1, 4)]
    assert sorted([0, *zones]) == [0, 0, 1, 1]  # db-0 on z0: spread keeps the skew at 0
    why = out["unschedulable"]
    assert why["default/huge"] == "0/4 nodes are available: 4 Insufficient cpu."
    assert "didn't match pod anti-affinity rules" in why["default/web-5"]
    # Before: n0 holds web-0 and db-0 (2 of 4 cpu); after, every node holds some.
    assert out["utilisation"]["before"]["n0"]["cpu"] == 0.5
    assert out["utilisation"]["before"]["n1"]["cpu"] == 0.0
    assert sum(u["cpu"] for u in out["utilisation"]["after"].values()) == 2.0  # 8 of 16 cpus
    expected = set(placed) | {"default/web-0", "default/db-0"}
    assert check(r, keys, expect_bound=expected) == []


def test_replay_from_scratch_on_the_embedded_server_as_a_command(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    dump = tmp_path / "dump.json"
    make_dump(r, redis_url, dump)
    run = subprocess.run(
        [sys.executable, "-m", "distsched", "replay", "-f", str(dump),
         "--pending-only=false", "-o", "json"],
        capture_output=True, text=True, timeout=240, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["pods"]["kept"] == 0 and out["pods"]["pending"] == 11
    # From scratch: 4 webs (one per host), 4 dbs; huge and one web do not fit.
    assert out["pods"]["scheduled"] == 8 and out["pods"]["unschedulable"] == 3
    assert out["utilisation"]["before"]["n0"] == {"cpu": 0.0, "memory": 0.0, "pods": 0.0}
    table = subprocess.run(
        [sys.executable, "-m", "distsched", "replay", "-f", str(dump)],
        capture_output=True, text=True, timeout=240, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert table.returncode == 0, table.stderr
    assert "0/4 nodes are available: 4 Insufficient cpu." in table.stdout
    assert "2 pods kept where they are, 9 pending: 6 fit, 3 do not" in table.stderr


def test_a_bad_dump_exits_2_naming_the_item(tmp_path: Path) -> None:
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        node("n1"), {**pod("p"), "spec": {"containers": [{"name": "c", "resources": {
            "requests": {"cpu": "much"}}}]}},
    ]}))  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-m", "distsched", "replay", "-f", str(dump)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2
    assert "dump.json: document 1, item 2 (Pod default/p)" in run.stderr
    assert "spec.containers[0].resources.requests.cpu" in run.stderr


def test_a_real_kubectl_dump_loads_as_the_scheduler_sees_it() -> None:
    """kubectl's output as it comes: managedFields, containerStatuses, a Succeeded pod,
    the built-in system class, a DaemonSet pod pinned by matchFields."""
    dump = str(DATA / "kubectl-dump.json")
    objects = load_dump([dump], pending_only=True)
    by_name = {o["metadata"]["name"]: o for o in objects}
    assert sorted(by_name) == ["kind-worker", "kube-proxy-7xk2p", "web-5d8f7b6c4d-k2lmn"]
    proxy = by_name["kube-proxy-7xk2p"]
    assert proxy["spec"]["nodeName"] == "kind-worker"
    assert proxy["spec"]["priority"] == 2000001000  # the cluster's, kept
    assert "managedFields" not in by_name["kind-worker"]["metadata"]
    web = by_name["web-5d8f7b6c4d-k2lmn"]
    assert not web["spec"].get("nodeName") and web["spec"]["priority"] == 0
    scratch = {o["metadata"]["name"]: o for o in load_dump([dump], pending_only=False)}
    assert "nodeName" not in scratch["kube-proxy-7xk2p"]["spec"]
    assert scratch["kube-proxy-7xk2p"]["status"] == {"phase": "Pending"}


NODE_LIST = DATA / "apiserver-nodelist.json"  # the API server's NodeList: items without kind
POD_LIST = DATA / "apiserver-podlist.yaml"  # its PodList, as YAML
GET_ALL = DATA / "kubectl-get-all.json"  # `kubectl get all -A -o json`


def test_the_api_servers_lists_load_with_the_kind_their_list_gives() -> None:
    skipped: Counter[str] = Counter()
    objects = load_dump([str(NODE_LIST), str(POD_LIST), str(GET_ALL)], pending_only=True,
                        skipped=skipped)  # fmt: skip
    kinds = Counter(o["kind"] for o in objects)
    # 14 pods of the PodList, 2 of get-all (its Succeeded Job pod is left out); the
    # workloads are loaded as apply loads them (no controller runs in a replay).
    assert kinds == {"Node": 4, "Pod": 16, "DaemonSet": 1, "Deployment": 1, "ReplicaSet": 1,
                     "Job": 1}  # fmt: skip
    assert skipped == {"Service": 3, "CronJob": 1, "HorizontalPodAutoscaler": 1}
    node = next(o for o in objects if o["kind"] == "Node")
    assert node["apiVersion"] == "v1" and "managedFields" not in node["metadata"]
    job = next(o for o in objects if o["kind"] == "Job")
    assert "selector" not in job["spec"]  # the server generated it from the Job's uid
    pods = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Pod"}
    assert pods["web-0365508689-000000"]["spec"]["nodeName"] == "node-00000"
    assert "report-28911460-x7k2p" not in pods


def test_replay_of_the_api_servers_lists_and_get_all_reports_what_it_skipped() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "distsched", "replay", "-f", str(NODE_LIST), "-f", str(POD_LIST),
         "-f", str(GET_ALL), "-o", "json"],
        capture_output=True, text=True, timeout=240, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["nodes"] == 4
    # Kept: 9 of the PodList, web-...-k2lmn of get-all; pending: 5 + 1, one fits nowhere.
    assert out["pods"] == {
        "kept": 10, "pending": 6, "scheduled": 5, "unschedulable": 1, "preempted": 0,
    }  # fmt: skip
    (huge,) = out["unschedulable"]
    assert huge == "team-6/api-2902841359-000013"
    assert out["unschedulable"][huge].startswith("0/4 nodes are available: ")
    assert out["skipped"] == {"CronJob": 1, "HorizontalPodAutoscaler": 1, "Service": 3}
    report = Report(skipped=out["skipped"])
    assert report.skipped_line() == "skipped: 3 Service, 1 CronJob, 1 HorizontalPodAutoscaler"


def test_a_big_dump_is_not_refused_for_its_size(tmp_path: Path) -> None:
    """A cluster dump is far bigger than a manifest (apply stops at 8 MiB)."""
    node_list, pod_list = api_server_dump(40, 4000, 100)
    (tmp_path / "nodes.json").write_text(json.dumps(node_list))
    (tmp_path / "pods.json").write_text(json.dumps(pod_list, indent=4))
    assert (tmp_path / "pods.json").stat().st_size > MAX_MANIFEST_BYTES
    objects = load_dump([str(tmp_path / "nodes.json"), str(tmp_path / "pods.json")],
                        pending_only=True)  # fmt: skip
    assert len(objects) == 4040
