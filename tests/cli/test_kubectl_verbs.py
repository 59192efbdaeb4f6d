"""The kubectl verbs of issue 25 (item 3): `get KIND NAME`, `-o name|yaml|json`, `-l`,
`--field-selector`, `delete -f`, `scale`, `top nodes`, `describe pod|node`. Expected
outputs are written by hand from kubectl (its printers, describe.go and its tabwriter) for
the same objects. Objects are created at T0, the CLI's clock reads T0 + 182 s."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from distsched.cli.selectors import SelectorError, parse_field_selector, parse_label_selector
from distsched.explain_record import Explanation, record_failure
from distsched.store import Store
from tests.cli.conftest import DATA, KEYS, T0_MS, Obj
from tests.cli.manifests import cli_env, invoke, write_yaml
from tests.support.objects import node, pod

pytestmark = pytest.mark.usefixtures("frozen_clock")


def labelled(store: Store) -> None:
    store.create_many(
        [
            node("n1"),
            node("n2"),
            pod("front", labels={"app": "web", "tier": "front"}),
            pod("back", labels={"app": "web", "tier": "back"}),
            pod("db", labels={"app": "db"}),
            pod("plain"),
            pod("other", namespace="prod", labels={"app": "web"}),
        ]
    )
    store.bind("default/front", None, "n1")
    store.bind("prod/other", None, "n2")


def names(redis_url: str, *args: str) -> list[str]:
    result = invoke(redis_url, "get", *args, "-o", "name")
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


# ------------------------------------------------------------------------- get KIND NAME


def test_get_one_object_by_name(r: redis.Redis, redis_url: str, store: Store) -> None:
    labelled(store)
    result = invoke(redis_url, "get", "pod", "front")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "NAME    READY   STATUS    RESTARTS   AGE\nfront   1/1     Pending   0          3m2s\n"
    )
    assert names(redis_url, "pod/front", "node/n2") == ["pod/front", "node/n2"]
    assert names(redis_url, "pods", "db", "-n", "default") == ["pod/db"]


def test_a_missing_name_is_kubectls_not_found_and_exit_1(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    labelled(store)
    result = invoke(redis_url, "get", "pods", "front", "nope")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[1].startswith("front ")  # what exists is shown
    assert result.stderr == 'Error from server (NotFound): pods "nope" not found\n'
    deploy = invoke(redis_url, "get", "deploy/web")
    assert deploy.exit_code == 1 and deploy.stdout == ""
    assert deploy.stderr == 'Error from server (NotFound): deployments.apps "web" not found\n'


def test_yaml_and_json_of_one_object_and_of_several(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    labelled(store)
    one = yaml.safe_load(invoke(redis_url, "get", "pod", "front", "-o", "yaml").stdout)
    assert one["kind"] == "Pod" and one["metadata"]["name"] == "front"
    assert one["spec"]["nodeName"] == "n1"
    again = json.loads(invoke(redis_url, "get", "pod/front", "-o", "json").stdout)
    assert again == one
    several = yaml.safe_load(invoke(redis_url, "get", "pod", "front", "db", "-o", "yaml").stdout)
    assert several["kind"] == "List"
    assert [p["metadata"]["name"] for p in several["items"]] == ["front", "db"]
    # A selector may match one object: still a List, as kubectl's.
    selected = json.loads(invoke(redis_url, "get", "pods", "-l", "app=db", "-o", "json").stdout)
    assert selected["kind"] == "List" and len(selected["items"]) == 1


def test_o_name_over_several_kinds(r: redis.Redis, redis_url: str, store: Store) -> None:
    labelled(store)
    store.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 1},
        }
    )
    assert names(redis_url, "pdb,nodes") == [
        "poddisruptionbudget.policy/web",
        "node/n1",
        "node/n2",
    ]


# ------------------------------------------------------------------------------- -l


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        ("app=web", ["pod/back", "pod/front"]),
        ("app==web,tier=back", ["pod/back"]),
        ("app!=web", ["pod/db", "pod/plain"]),
        ("app in (web,db)", ["pod/back", "pod/db", "pod/front"]),
        ("app notin (web)", ["pod/db", "pod/plain"]),
        ("tier", ["pod/back", "pod/front"]),
        ("!tier", ["pod/db", "pod/plain"]),
        ("app, !tier", ["pod/db"]),
        ("", ["pod/back", "pod/db", "pod/front", "pod/plain"]),
    ],
)
def test_label_selectors_select_as_kubectls(
    r: redis.Redis, redis_url: str, store: Store, selector: str, selected: list[str]
) -> None:
    labelled(store)
    assert names(redis_url, "pods", "-l", selector) == selected


@pytest.mark.parametrize("bad", ["app in ()", "app=a b", "-app=x", "app in (a", "a,,b"])
def test_a_malformed_label_selector_is_bad_input(r: redis.Redis, redis_url: str, bad: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(bad)
    result = invoke(redis_url, "get", "pods", "-l", bad)
    assert result.exit_code == 2 and result.stderr.startswith("error: "), result.output


def test_selectors_match_labels_as_kube_does() -> None:
    selector = parse_label_selector("env in (prod, staging),!canary,tier!=cache,version>2")
    assert selector.matches({"env": "prod", "version": "3"})
    assert not selector.matches({"env": "prod", "version": "2"})
    assert not selector.matches({"env": "prod", "version": "3", "canary": "yes"})
    assert not selector.matches({"env": "dev", "version": "3"})
    assert not selector.matches({"env": "prod", "version": "3", "tier": "cache"})
    assert parse_field_selector("spec.nodeName=,status.phase!=Failed").matches(
        "Pod", {"spec": {}, "status": {}}
    )


# ---------------------------------------------------------------------- --field-selector


def test_field_selectors(r: redis.Redis, redis_url: str, store: Store) -> None:
    labelled(store)
    assert names(redis_url, "pods", "--field-selector", "spec.nodeName=n1") == ["pod/front"]
    assert names(redis_url, "pods", "-A", "--field-selector", "spec.nodeName!=") == [
        "pod/front",
        "pod/other",
    ]
    # The phase the API server gives every pod it has not been told otherwise of.
    assert names(redis_url, "pods", "--field-selector", "status.phase=Pending") == [
        "pod/back", "pod/db", "pod/front", "pod/plain",
    ]  # fmt: skip
    assert names(redis_url, "pods", "-A", "--field-selector", "metadata.namespace=prod") == [
        "pod/other"
    ]
    assert names(redis_url, "pods", "--field-selector", "metadata.name=db") == ["pod/db"]
    r_nodes = names(redis_url, "nodes", "--field-selector", "metadata.name!=n1")
    assert r_nodes == ["node/n2"]
    bad = invoke(redis_url, "get", "pods", "--field-selector", "spec.containers=x")
    assert bad.exit_code == 2
    assert "field label not supported: spec.containers" in bad.stderr


# -------------------------------------------------------------------------------- delete


def test_delete_f_deletes_what_the_file_names(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    manifest = write_yaml(
        tmp_path / "app.yaml",
        [
            pod("web-1"),
            pod("web-2", namespace="prod"),
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {}},
        ],
    )
    assert invoke(redis_url, "apply", "-f", str(manifest)).exit_code == 0
    deleted = invoke(redis_url, "delete", "-f", str(manifest))
    assert deleted.exit_code == 0, deleted.output
    assert deleted.stdout.splitlines() == [
        'pod "web-1" deleted',
        'pod "web-2" deleted',
        'service "web" deleted',
    ]
    assert Store(r, KEYS).list("Pod")[0] == []
    again = invoke(redis_url, "delete", "-f", str(manifest))
    assert again.exit_code == 1 and again.stdout == ""
    assert again.stderr.splitlines() == [
        'Error from server (NotFound): pods "web-1" not found',
        'Error from server (NotFound): pods "web-2" not found',
        'Error from server (NotFound): services "web" not found',
    ]
    quiet = invoke(redis_url, "delete", "-f", str(manifest), "--ignore-not-found")
    assert (quiet.exit_code, quiet.stdout, quiet.stderr) == (0, "", "")


def test_delete_by_name_and_by_selector(r: redis.Redis, redis_url: str, store: Store) -> None:
    labelled(store)
    by_name = invoke(redis_url, "delete", "pod/plain", "node/n2")
    assert by_name.stdout.splitlines() == ['pod "plain" deleted', 'node "n2" deleted']
    by_label = invoke(redis_url, "delete", "pods", "-l", "app=web")
    assert by_label.stdout.splitlines() == ['pod "back" deleted', 'pod "front" deleted']
    assert [p["metadata"]["name"] for p in store.list("Pod")[0]] == ["db", "other"]
    assert invoke(redis_url, "delete", "pods").exit_code == 2  # no name, no selector


# --------------------------------------------------------------------------------- scale


def workload(kind: str, name: str, **spec: Any) -> Obj:
    version = "batch/v1" if kind == "Job" else "apps/v1"
    template = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c"}]}}
    return {
        "apiVersion": version,
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": template, **spec},
    }


def test_scale_sets_replicas_and_job_parallelism(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    store.create_many(
        [
            workload("Deployment", "web", replicas=3),
            workload("StatefulSet", "db", replicas=2),
            workload("ReplicaSet", "cache", replicas=1),
            workload("Job", "batch", parallelism=2, completions=10),
        ]
    )
    for args, line in [
        (["deploy/web"], "deployment.apps/web scaled"),
        (["statefulset", "db"], "statefulset.apps/db scaled"),
        (["rs/cache"], "replicaset.apps/cache scaled"),
        (["job", "batch"], "job.batch/batch scaled"),
    ]:
        result = invoke(redis_url, "scale", *args, "--replicas", "5")
        assert (result.exit_code, result.stdout) == (0, line + "\n"), result.output
    assert store.get("Deployment", "default/web")["spec"]["replicas"] == 5  # type: ignore[index]
    assert store.get("StatefulSet", "default/db")["spec"]["replicas"] == 5  # type: ignore[index]
    assert store.get("ReplicaSet", "default/cache")["spec"]["replicas"] == 5  # type: ignore[index]
    job = store.get("Job", "default/batch")
    assert job is not None and job["spec"]["parallelism"] == 5 and job["spec"]["completions"] == 10

    stale = invoke(redis_url, "scale", "deploy/web", "--replicas", "1", "--current-replicas", "3")
    assert stale.exit_code == 1
    assert stale.stderr == "error: Expected replicas to be 3, was 5\n"
    missing = invoke(redis_url, "scale", "deploy/nope", "--replicas", "1")
    assert missing.exit_code == 1
    assert missing.stderr == 'Error from server (NotFound): deployments.apps "nope" not found\n'
    assert invoke(redis_url, "scale", "ds/web", "--replicas", "1").exit_code == 2


# ---------------------------------------------------------------------------- top nodes


def test_top_nodes_from_the_store_and_from_the_ledger(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    store.create_many(
        [node("n1", cpu="4", memory="8Gi", pods="110"), node("n2", cpu="2", pods="10")]
    )
    store.create_many([pod(f"p{i}") for i in range(3)])
    for i in range(3):
        store.bind(f"default/p{i}", None, "n1")
    # No worker has seen the nodes: the store's bound pods (100m and 128Mi each).
    result = invoke(redis_url, "top", "nodes")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "NAME   CPU(requests)   CPU(%)   MEMORY(requests)   MEMORY(%)   PODS",
        "n1     300m            7%       384Mi              4%          3/110",
        "n2     0m              0%       0Mi                0%          0/10",
    ]
    # A node the ledger holds reads what assumed and bound pods hold there.
    r.hset(
        KEYS.ledger_node("n2"),
        mapping={"alloc:cpu": 2000, "alloc:memory": 16 * 2**30, "alloc:pods": 10, "live": 1},
    )
    r.hset(KEYS.ledger_usage, "n2", f"4|0|+cpu=100,cpu=1500,memory={2**30},pods=2")
    assert invoke(redis_url, "top", "node", "n2").stdout.splitlines() == [
        "NAME   CPU(requests)   CPU(%)   MEMORY(requests)   MEMORY(%)   PODS",
        "n2     1500m           75%      1024Mi             6%          2/10",
    ]


# ------------------------------------------------------------------------------ describe


def test_describe_a_pending_pod_shows_its_failed_scheduling_event(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    web = pod(
        "web-1",
        labels={"app": "web", "tier": "front"},
        container="c",
        image="nginx:1.27",
        priority=100,
        priorityClassName="high",
        nodeSelector={"disktype": "ssd"},
        tolerations=[
            {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
            {"operator": "Exists"},
        ],
    )
    web["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    web["spec"]["containers"][0]["resources"]["limits"] = {"memory": "256Mi"}
    store.create(web)
    message = "0/3 nodes are available: 3 Insufficient cpu."
    record_failure(
        r,
        KEYS,
        "default/web-1",
        Explanation(message, ("NodeResourcesFit",), "default-scheduler", T0_MS + 120_000),
    )
    result = invoke(redis_url, "describe", "pod", "web-1")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "Name:                 web-1\n"
        "Namespace:            default\n"
        "Priority:             100\n"
        "Priority Class Name:  high\n"
        "Node:                 <none>\n"
        "Labels:               app=web\n"
        "                      tier=front\n"
        "Annotations:          <none>\n"
        "Status:               Pending\n"
        "IP:                   \n"
        "IPs:                  <none>\n"
        "Containers:\n"
        "  c:\n"
        "    Image:      nginx:1.27\n"
        "    Port:       80/TCP\n"
        "    Host Port:  0/TCP\n"
        "    Limits:\n"
        "      memory:  256Mi\n"
        "    Requests:\n"
        # No line between them and Volumes: one tabwriter column block, as kubectl's.
        "      cpu:        100m\n"
        "      memory:     128Mi\n"
        "    Environment:  <none>\n"
        "    Mounts:       <none>\n"
        "Volumes:          <none>\n"
        "QoS Class:        Burstable\n"
        "Node-Selectors:   disktype=ssd\n"
        "Tolerations:      op=Exists\n"
        "                  dedicated=gpu:NoSchedule\n"
        "Events:\n"
        "  Type     Reason            Age   From               Message\n"
        "  ----     ------            ----  ----               -------\n"
        "  Warning  FailedScheduling  62s   default-scheduler  " + message + "\n"
    )


def test_describe_a_bound_pod_shows_where_it_was_scheduled(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    store.create_many([node("n1"), pod("web-1", namespace="prod")])
    store.bind("prod/web-1", None, "n1")
    out = invoke(redis_url, "describe", "pod/web-1", "-n", "prod").stdout.splitlines()
    assert "Node:         n1/" in out
    assert out[out.index("Conditions:") :][:3] == [
        "Conditions:",
        "  Type           Status",
        "  PodScheduled   True ",
    ]
    assert out[-3:] == [
        "  Type    Reason     Age   From               Message",
        "  ----    ------     ----  ----               -------",
        "  Normal  Scheduled  3m2s  default-scheduler  Successfully assigned prod/web-1 to n1",
    ]
    missing = invoke(redis_url, "describe", "pod", "nope")
    assert missing.exit_code == 1
    assert missing.stderr == 'Error from server (NotFound): pods "nope" not found\n'


def test_describe_a_node_shows_its_pods_and_allocated_resources(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    big = pod("b", namespace="prod", cpu="500m", memory="1Gi")
    big["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "1", "memory": "2Gi"}
    done = pod("c")
    done["status"] = {"phase": "Succeeded"}
    store.create_many(
        [
            node("n1", cpu="4", memory="8Gi", pods="110", taints=[
                {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
            ]),
            pod("a"),
            big,
            done,
        ]
    )  # fmt: skip
    for key in ("default/a", "prod/b", "default/c"):
        store.bind(key, None, "n1")
    created = time.strftime("%a, %d %b %Y %H:%M:%S %z", time.localtime(T0_MS / 1000))
    result = invoke(redis_url, "describe", "node", "n1")
    assert result.exit_code == 0, result.output
    assert result.stdout == (DATA / "describe-node.txt").read_text().format(created=created)
    assert invoke(redis_url, "describe", "deploy", "web").exit_code == 1  # not found


# --------------------------------------------------------------------------------- watch


def test_watch_prints_a_row_each_time_one_changes(r: redis.Redis, redis_url: str) -> None:
    live = Store(r, KEYS)  # real time: the watcher is another process
    live.create_many([node("n1"), pod("web-1"), pod("web-2"), pod("elsewhere", namespace="prod")])
    watcher = subprocess.Popen(
        [sys.executable, "-m", "distsched", "get", "pods", "-w", "--request-timeout", "4s",
         "--redis-url", redis_url, "--scheduler", "test"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
    )  # fmt: skip
    try:
        assert watcher.stdout is not None
        first = [watcher.stdout.readline() for _ in range(3)]  # the table: it is watching
        live.bind("default/web-1", None, "n1")
        live.bind("prod/elsewhere", None, "n1")  # another namespace: not shown
        live.delete("Pod", "default/web-2")
        out, err = watcher.communicate(timeout=30)
    finally:
        watcher.kill()
    assert watcher.returncode == 0, err
    rows = [re.sub(r"\d+s$", "<age>", line) for line in first + out.splitlines(keepends=True)]
    assert "".join(rows).splitlines() == [
        "NAME    READY   STATUS    RESTARTS   AGE",
        "web-1   0/1     Pending   0          <age>",
        "web-2   0/1     Pending   0          <age>",
        "web-1   1/1     Pending   0          <age>",  # bound
        "web-2   0/1     Pending   0          <age>",  # deleted: its last state
    ]
