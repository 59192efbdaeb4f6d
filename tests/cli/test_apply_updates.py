"""``distsched apply`` of objects that exist: the API server's update rules, whole-file
refusal, concurrent applies of one pod, uids, a partial apply cut by Redis running out of
memory, and ``get`` past a damaged record."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from distsched.embedded import EmbeddedRedis
from distsched.keys import Keys
from distsched.store import Store
from tests.cli.manifests import cli_env, invoke, node, pod, write_yaml

KEYS = Keys("test")


def requests_of(store: Store, name: str) -> dict[str, str]:
    obj = store.get("Pod", f"default/{name}")
    assert obj is not None
    return dict(obj["spec"]["containers"][0]["resources"]["requests"])


def bound_web(r: redis.Redis, redis_url: str, tmp_path: Path) -> Store:
    """Node n1 (4 cpu) and pod web-1 (1 cpu) bound to it, as the scheduler leaves them."""
    write_yaml(tmp_path / "setup.yaml", [node("n1"), pod("web-1", cpu="1")])
    assert invoke(redis_url, "apply", "-f", str(tmp_path / "setup.yaml")).exit_code == 0
    store = Store(r, KEYS)
    store.bind("default/web-1", None, "n1")
    return store


def test_a_bound_pods_requests_cannot_be_changed_and_nothing_of_the_file_is_written(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    store = bound_web(r, redis_url, tmp_path)
    rv = store.resource_version()
    path = write_yaml(tmp_path / "pods.yaml", [pod("other"), pod("web-1", cpu="3")])
    result = invoke(redis_url, "apply", "-f", str(path))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    message = result.stderr.strip()
    assert "\n" not in message
    assert message.startswith(
        f"error: {path}: document 2 (Pod default/web-1): "
        "spec.containers[0].resources.requests.cpu: field is immutable"
    ), message
    assert store.resource_version() == rv, "nothing written"
    assert store.get("Pod", "default/other") is None
    assert requests_of(store, "web-1")["cpu"] == "1"


def test_what_kube_lets_an_update_change_is_configured(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    store = bound_web(r, redis_url, tmp_path)
    changed = pod("web-1", cpu="1")
    changed["metadata"]["labels"] = {"tier": "web"}
    changed["spec"]["containers"][0]["image"] = "nginx:1.28"
    changed["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    result = invoke(redis_url, "apply", "-f", str(write_yaml(tmp_path / "p.yaml", [changed])))
    assert result.exit_code == 0, result.output
    assert result.stdout == "pod/web-1 configured\n"
    stored = store.get("Pod", "default/web-1")
    assert stored is not None
    assert stored["spec"]["nodeName"] == "n1"
    assert stored["spec"]["containers"][0]["image"] == "nginx:1.28"
    node_changed = node("n1", cpu="8")
    result = invoke(redis_url, "apply", "-f", str(write_yaml(tmp_path / "n.yaml", [node_changed])))
    assert result.stdout == "node/n1 configured\n", "nodes stay mutable"


def test_a_reapplied_pod_keeps_its_status_unless_the_manifest_states_one(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    store = bound_web(r, redis_url, tmp_path)
    invoke(redis_url, "apply", "-f", str(write_yaml(tmp_path / "p.yaml", [pod("pending")])))
    store.update_pod_status("default/pending", nominated_node_name="n1")
    relabelled = [pod("web-1", cpu="1"), pod("pending")]
    for doc in relabelled:
        doc["metadata"]["labels"] = {"v": "2"}
    result = invoke(redis_url, "apply", "-f", str(write_yaml(tmp_path / "r.yaml", relabelled)))
    assert result.exit_code == 0, result.output
    web, pending = (store.get("Pod", f"default/{n}") for n in ("web-1", "pending"))
    assert web is not None and pending is not None
    assert {"type": "PodScheduled", "status": "True"}.items() <= web["status"]["conditions"][
        0
    ].items()
    assert pending["status"]["nominatedNodeName"] == "n1"
    done = {**pod("web-1", cpu="1"), "status": {"phase": "Succeeded"}}
    result = invoke(redis_url, "apply", "-f", str(write_yaml(tmp_path / "d.yaml", [done])))
    assert result.exit_code == 0, result.output
    assert store.get("Pod", "default/web-1")["status"]["phase"] == "Succeeded"  # type: ignore[index]


def test_moving_a_bound_pod_is_bad_input(r: redis.Redis, redis_url: str, tmp_path: Path) -> None:
    bound_web(r, redis_url, tmp_path)
    moved = {**pod("web-1", cpu="1")}
    moved["spec"] = {**moved["spec"], "nodeName": "n2"}
    result = invoke(redis_url, "apply", "-f", str(write_yaml(tmp_path / "m.yaml", [moved])))
    assert result.exit_code == 2
    assert "document 1 (Pod default/web-1): spec.nodeName: field is immutable" in result.stderr


def test_priority_admission_runs_on_create_only(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    # kube's priority admission resolves nothing on update: a default class created later
    # does not reprioritise a pod re-applied for a label change.
    invoke(redis_url, "apply", "-f", str(write_yaml(tmp_path / "a.yaml", [pod("web-1")])))
    default = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
        "globalDefault": True,
    }
    relabelled = pod("web-1")
    relabelled["metadata"]["labels"] = {"v": "2"}
    path = write_yaml(tmp_path / "b.yaml", [default, relabelled])
    result = invoke(redis_url, "apply", "-f", str(path))
    assert result.exit_code == 0, result.output
    stored = Store(r, KEYS).get("Pod", "default/web-1")
    assert stored is not None
    assert stored["metadata"]["labels"] == {"v": "2"}
    assert stored["spec"]["priority"] == 0
    assert "priorityClassName" not in stored["spec"]


def test_a_manifest_uid_is_ignored_on_create_and_immutable_after(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    docs = [pod("a"), pod("b")]
    for doc in docs:
        doc["metadata"]["uid"] = "same|uid\nwith a newline"
    path = write_yaml(tmp_path / "uids.yaml", docs)
    assert invoke(redis_url, "apply", "-f", str(path)).exit_code == 0
    store = Store(r, KEYS)
    uids = [store.get("Pod", f"default/{n}")["metadata"]["uid"] for n in "ab"]  # type: ignore[index]
    assert len(set(uids)) == 2 and all("|" not in u and "\n" not in u for u in uids)
    again = invoke(redis_url, "apply", "-f", str(path))
    assert again.exit_code == 2
    assert "document 1 (Pod default/a): metadata.uid: field is immutable" in again.stderr


def contender(i: int) -> dict[str, Any]:
    doc = pod("contended", cpu=f"{i + 1}")
    doc["metadata"]["labels"] = {"writer": str(i)}
    doc["spec"]["containers"][0]["image"] = f"img:{i}"
    return doc


def test_four_shells_applying_different_requests_leave_one_writers_pod(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    files = [write_yaml(tmp_path / f"w{i}.yaml", [contender(i)]) for i in range(4)]
    cmd = [sys.executable, "-m", "distsched", "apply", "--redis-url", redis_url]
    procs = [
        subprocess.Popen(
            [*cmd, "--scheduler", "test", "-f", str(f)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(),
        )
        for f in files
    ]
    results = [(p.wait(timeout=60), *p.communicate()) for p in procs]
    winners = [i for i, (code, _, _) in enumerate(results) if code == 0]
    assert len(winners) == 1, results
    for i, (code, out, err) in enumerate(results):
        if i != winners[0]:
            assert code == 2 and out == "", (code, out, err)
            assert "spec.containers[0].resources.requests.cpu: field is immutable" in err
    stored = Store(r, KEYS).get("Pod", "default/contended")
    assert stored is not None
    want = contender(winners[0])
    assert stored["metadata"]["labels"] == want["metadata"]["labels"]
    assert stored["spec"]["containers"] == want["spec"]["containers"]


def test_get_skips_an_undecodable_record_with_a_warning(r: redis.Redis, redis_url: str) -> None:
    store = Store(r, KEYS)
    store.create_many([pod("a"), pod("c")])
    r.hset(KEYS.objects("Pod"), "default/b", b"\xc1 not msgpack")
    result = invoke(redis_url, "get", "pods", "-o", "json")
    assert result.exit_code == 0, result.output
    names = [o["metadata"]["name"] for o in yaml.safe_load(result.stdout)["items"]]
    assert names == ["a", "c"]
    assert "warning: skipping Pod 'default/b'" in result.stderr
    assert "Traceback" not in result.output
    table = invoke(redis_url, "get", "pods")
    assert table.exit_code == 0 and "default/b" in table.stderr


# ------------------------------------------------------------------- out of memory mid-file


@pytest.fixture(params=["embedded", "redis-server"])
def small_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A private server (the test sets its maxmemory; never the shared test server's)."""
    binary = None
    if request.param == "redis-server":
        found = shutil.which("redis-server")
        if found is None:
            if os.environ.get("CI"):
                pytest.fail("CI machines have redis-server (Redis 7.0); it is missing")
            pytest.skip("no redis-server on PATH")
        binary = Path(found)
    args = ["--maxmemory-policy", "noeviction"]
    with EmbeddedRedis(binary=binary, data_dir=tmp_path, appendfsync="no", extra_args=args) as srv:
        yield srv


def padded_pod(name: str) -> dict[str, Any]:
    doc = copy.deepcopy(pod(name))
    doc["metadata"]["annotations"] = {"note": "x" * 2000}
    return doc


def test_an_apply_cut_by_out_of_memory_prints_what_it_wrote(
    small_server: EmbeddedRedis, tmp_path: Path
) -> None:
    from distsched.cli.objects import APPLY_CHUNK

    url = small_server.url
    client = redis.Redis.from_url(url)
    # Room for about one chunk of these pods, measured on a scratch deployment.
    scratch = Store(client, Keys("scratch"))
    before = int(client.info("memory")["used_memory"])
    scratch.create_many([padded_pod(f"s{i}") for i in range(APPLY_CHUNK)])
    chunk = int(client.info("memory")["used_memory"]) - before
    client.flushall()
    client.config_set("maxmemory", int(client.info("memory")["used_memory"]) + chunk * 3 // 2)
    total = APPLY_CHUNK * 4
    path = write_yaml(tmp_path / "many.yaml", [padded_pod(f"p{i:04d}") for i in range(total)])
    result = invoke(url, "apply", "-f", str(path))
    assert result.exit_code == 1, result.output
    assert "maxmemory" in result.stderr and "Traceback" not in result.output
    client.config_set("maxmemory", 0)  # Redis 7.0 refuses even a MULTI of reads when full
    stored = {o["metadata"]["name"] for o in Store(client, KEYS).list("Pod")[0]}
    assert 0 < len(stored) < total
    assert result.stdout.splitlines() == [f"pod/{n} created" for n in sorted(stored)]
    client.close()
