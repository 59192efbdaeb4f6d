"""Whole install files, applied unchanged (issue 25): Services, RBAC, ConfigMaps, Secrets,
PVCs, StorageClasses, NetworkPolicies, CRDs and custom resources beside the workloads.
Every workload is created and placed as kube would place it (the checker is clean), every
other object is stored as given and listed by `get`; `--strict` refuses them; objects
kube would refuse (an API version it no longer serves, a bad name) refuse the file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import redis
import yaml
from click.testing import CliRunner, Result

from distsched.bench.checker import check
from distsched.bench.procs import ProcessGroup
from distsched.cli import main
from distsched.keys import Keys
from distsched.store import Store
from tests.cli.manifests import invoke, stored_keys
from tests.support.objects import ZONE
from tests.support.readers import bound_nodes
from tests.support.waits import wait_for

DATA = Path(__file__).parent / "data" / "whole_files"
INSTALLS = ("wordpress.yaml", "operator.yaml", "monitoring.yaml")
# wordpress-mysql 1 + wordpress 3, the operator's manager 2, prometheus 2,
# kube-state-metrics 1, node-exporter on each of the 6 nodes.
BOUND = 1 + 3 + 2 + 2 + 1 + 6


def cli(url: str, *args: str) -> Result:
    """``distsched ARGS`` in this process on the default deployment (a ProcessGroup's)."""
    runner = CliRunner(env={"DISTSCHED_REDIS_URL": None})
    return runner.invoke(main, [*args, "--redis-url", url])


def names(result: Result) -> list[str]:
    assert result.exit_code == 0, result.output
    return sorted(o["metadata"]["name"] for o in json.loads(result.stdout)["items"])


def test_install_files_apply_unchanged_and_place_as_kube_would(
    private_client: redis.Redis, processes: ProcessGroup, tmp_path: Path
) -> None:
    url = processes.redis_url
    files = [str(DATA / f) for f in ("nodes.yaml", "storage.yaml", *INSTALLS)]
    applied = cli(url, "apply", *(arg for f in files for arg in ("-f", f)))
    assert applied.exit_code == 0, applied.output
    lines = applied.stdout.splitlines()
    for line in (
        "deployment/wordpress created",
        "service/wordpress stored (not scheduled)",
        "persistentvolumeclaim/mysql-pv-claim stored (not scheduled)",
        "customresourcedefinition/memcacheds.cache.example.com stored (not scheduled)",
        "memcached.cache.example.com/memcached-sample stored (not scheduled)",
        "clusterrole/memcached-operator:metrics-reader stored (not scheduled)",
        "podmonitor.monitoring.coreos.com/kube-state-metrics stored (not scheduled)",
        "statefulset/prometheus-k8s created",
        "cronjob/prometheus-snapshot stored (not scheduled)",
    ):
        assert line in lines, applied.stdout
    processes.spawn("worker")
    processes.spawn("binder")
    processes.spawn("controller")
    wait_for("the pods to bind", lambda: len(bound_nodes(private_client)) == BOUND, 60)
    bound = bound_nodes(private_client)
    assert len(bound) == BOUND, bound

    def placed(namespace: str, prefix: str) -> list[str]:
        return [v for k, v in sorted(bound.items()) if k.startswith(f"{namespace}/{prefix}")]

    store = Store(private_client, Keys())
    zone = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in store.list("Node")[0]}
    exporters = placed("monitoring", "node-exporter-")
    assert sorted(exporters) == sorted(zone)  # one per node, the control plane included
    others = [node for pod, node in bound.items() if "node-exporter-" not in pod]
    assert "control-plane" not in others  # its taint keeps everything else off
    managers = placed("memcached-operator-system", "memcached-operator-controller-manager-")
    assert len(managers) == 2 and len(set(managers)) == 2  # required anti-affinity
    assert len(placed("default", "wordpress-mysql-")) == 1
    assert sorted(zone[n] for n in frontends(store, bound)) == ["zone-a", "zone-b", "zone-c"]
    prometheus = placed("monitoring", "prometheus-k8s-")
    assert len(prometheus) == 2 and len({zone[n] for n in prometheus}) == 2  # spread
    for key in (f"monitoring/prometheus-k8s-{i}" for i in (0, 1)):
        pod = store.get("Pod", key)
        assert pod is not None and pod["spec"]["priority"] == 1_000_000  # admission
    assert check(private_client, Keys(), expect_bound=set(bound)) == []

    # The objects distsched does not act on are stored as given and listed by get.
    assert names(cli(url, "get", "svc", "-A", "-o", "json")) == [
        "memcached-operator-controller-manager-metrics-service",
        "prometheus-k8s",
        "wordpress",
        "wordpress-mysql",
    ]
    assert names(cli(url, "get", "pvc,sc", "-o", "json")) == [
        "fast-ssd",
        "mysql-pv-claim",
        "standard",
        "wp-pv-claim",
    ]
    assert names(cli(url, "get", "clusterroles.rbac.authorization.k8s.io", "-o", "json")) == [
        "kube-state-metrics",
        "memcached-operator-manager-role",
        "memcached-operator:metrics-reader",
        "prometheus-k8s",
    ]
    assert names(cli(url, "get", "mc", "-o", "json")) == ["memcached-sample"]  # CRD short name
    assert names(cli(url, "get", "podmonitors", "-n", "monitoring", "-o", "json")) == [
        "kube-state-metrics"  # no CRD stored: found by its kind
    ]
    policies = json.loads(cli(url, "get", "cachepolicies", "-o", "json").stdout)["items"]
    assert [p["metadata"].get("namespace") for p in policies] == [None]  # its CRD: Cluster
    table = cli(url, "get", "networkpolicies", "-n", "monitoring")
    assert table.exit_code == 0, table.output
    header, *rows = table.stdout.splitlines()  # kubectl's columns for NetworkPolicies
    assert header == "NAME             POD-SELECTOR                           AGE"
    assert [re.sub(r"\d+s$", "<age>", row) for row in rows] == [
        "node-exporter    app.kubernetes.io/name=node-exporter   <age>",
        "prometheus-k8s   app.kubernetes.io/name=prometheus      <age>",
    ]
    pvc = json.loads(cli(url, "get", "pvc", "-o", "json").stdout)["items"][0]
    given = list(yaml.safe_load_all((DATA / "wordpress.yaml").read_text()))[3]
    # Stored as given, then bound as kube's PV controller binds it: the default class
    # (DefaultStorageClass admission) and the volume provisioned for it.
    bound_spec = {**given["spec"], "storageClassName": "standard"}
    assert {k: v for k, v in pvc["spec"].items() if k != "volumeName"} == bound_spec
    assert pvc["spec"]["volumeName"] and pvc["status"]["phase"] == "Bound"
    assert pvc["metadata"]["labels"] == {"app": "wordpress"}

    # -o yaml round-trips: what get prints applies back unchanged.
    dump = tmp_path / "stored.yaml"
    dump.write_text(cli(url, "get", "svc,cm,secrets,crd,memcacheds", "-A", "-o", "yaml").stdout)
    again = cli(url, "apply", "-f", str(dump))
    assert again.exit_code == 0, again.output
    assert again.stdout.count("unchanged (not scheduled)") == 4 + 2 + 2 + 2 + 1, again.stdout

    # delete KIND NAME, for a built-in kind and for custom ones of both scopes.
    assert cli(url, "delete", "svc", "wordpress").exit_code == 0
    assert cli(url, "delete", "memcached", "memcached-sample").exit_code == 0
    assert cli(url, "delete", "cachepolicy", "default-policy").exit_code == 0
    assert store.get("Service", "default/wordpress") is None
    assert store.list("Memcached.cache.example.com")[0] == []
    missing = cli(url, "delete", "configmap", "nothing-here")
    assert missing.exit_code == 1 and "not found" in missing.stderr


def frontends(store: Store, bound: dict[str, str]) -> list[str]:
    """Nodes of the wordpress frontend pods (tier=frontend)."""
    return [
        bound[f"default/{p['metadata']['name']}"]
        for p in store.list("Pod", "default")[0]
        if p["metadata"]["labels"].get("tier") == "frontend"
    ]


def test_strict_refuses_kinds_distsched_does_not_act_on(r: redis.Redis, redis_url: str) -> None:
    refused = invoke(redis_url, "apply", "--strict", "-f", str(DATA / "wordpress.yaml"))
    assert refused.exit_code == 2, refused.output
    assert "wordpress.yaml: document 1 (Secret default/mysql-pass): kind:" in refused.stderr
    assert "--strict" in refused.stderr
    assert stored_keys(r, Keys("test")) == []
    fine = invoke(redis_url, "apply", "--strict", "-f", str(DATA / "nodes.yaml"))
    assert fine.exit_code == 0, fine.output


GOOD_DOCS = [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {}},
]
REMOVED = [  # (apiVersion, kind) kube no longer serves
    ("policy/v1beta1", "PodDisruptionBudget"),
    ("policy/v1beta1", "PodSecurityPolicy"),
    ("extensions/v1beta1", "Deployment"),
    ("extensions/v1beta1", "Ingress"),
    ("apps/v1beta1", "StatefulSet"),
    ("apps/v1beta2", "DaemonSet"),
    ("rbac.authorization.k8s.io/v1beta1", "ClusterRoleBinding"),
    ("batch/v1beta1", "CronJob"),
    ("networking.k8s.io/v1beta1", "Ingress"),
    ("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition"),
    ("storage.k8s.io/v1beta1", "StorageClass"),
    ("autoscaling/v2beta2", "HorizontalPodAutoscaler"),
    ("admissionregistration.k8s.io/v1beta1", "MutatingWebhookConfiguration"),
    ("v1", "Deployment"),  # a kind of another group
]


@pytest.mark.parametrize(("api_version", "kind"), REMOVED, ids=[f"{v}-{k}" for v, k in REMOVED])
def test_an_api_version_kube_no_longer_serves_refuses_the_file(
    r: redis.Redis, redis_url: str, tmp_path: Path, api_version: str, kind: str
) -> None:
    path = tmp_path / "install.yaml"
    old = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "old"}, "spec": {}}
    path.write_text(yaml.safe_dump_all([*GOOD_DOCS, old]))
    result = invoke(redis_url, "apply", "-f", str(path))
    assert result.exit_code == 2, result.output
    assert f"install.yaml: document 3 ({kind} " in result.stderr
    assert f'apiVersion: no matches for kind "{kind}" in version "{api_version}"' in result.stderr
    assert stored_keys(r, Keys("test")) == []


INVALID = [  # (object, field named, reason fragment)
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "My_Config"}},
     "metadata.name", "RFC 1123 subdomain"),
    ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1web"}},
     "metadata.name", "RFC 1035 label"),
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "A B"}},
     "metadata.namespace", "RFC 1123 label"),
    ({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": {"a": "b c"}}},
     "metadata.labels.a", "invalid value"),
    ({"kind": "ConfigMap", "metadata": {"name": "c"}}, "apiVersion", "required value"),
    ({"apiVersion": "v1", "metadata": {"name": "c"}}, "kind", "required value"),
    ({"apiVersion": "v1", "kind": "Config Map", "metadata": {"name": "c"}}, "kind", "a letter"),
    ({"apiVersion": "Example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
     "apiVersion", "GROUP/VERSION"),
    ({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {}},
     "metadata.name", "required value"),
    ({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
      "metadata": {"name": "widgets.example.com"},
      "spec": {"group": "example.com", "scope": "Namespaced",
               "names": {"kind": "Widget", "plural": "gadgets"}}},
     "metadata.name", 'must be spec.names.plural+"."+spec.group'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("obj", "field", "reason"), INVALID, ids=[i[1] + "-" + i[2] for i in INVALID]
)
def test_an_object_kube_would_refuse_refuses_the_file(
    r: redis.Redis, redis_url: str, tmp_path: Path, obj: dict, field: str, reason: str
) -> None:
    path = tmp_path / "install.yaml"
    path.write_text(yaml.safe_dump_all([*GOOD_DOCS, obj]))
    result = invoke(redis_url, "apply", "-f", str(path))
    assert result.exit_code == 2, result.output
    assert "install.yaml: document 3" in result.stderr
    assert f": {field}: " in result.stderr and reason in result.stderr, result.stderr
    assert stored_keys(r, Keys("test")) == []


def test_apply_takes_several_files_as_kubectl_does(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    a = tmp_path / "a.yaml"
    b = tmp_path / "b.yaml"
    a.write_text(yaml.safe_dump_all(GOOD_DOCS))
    b.write_text((DATA / "nodes.yaml").read_text())
    result = invoke(redis_url, "apply", "-f", str(a), "-f", str(b))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:3] == [
        "configmap/settings stored (not scheduled)",
        "service/web stored (not scheduled)",
        "node/control-plane created",
    ]
    store = Store(r, Keys("test"))
    assert len(store.list("Node")[0]) == 6 and store.get("Service", "default/web") is not None
    twice = invoke(redis_url, "apply", "-f", str(a), "-f", str(a))
    assert twice.exit_code == 2 and 'duplicate ConfigMap "default/settings"' in twice.stderr


def test_a_custom_resource_takes_its_scope_from_the_stored_definition(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    crd = tmp_path / "crd.yaml"
    cr = tmp_path / "cr.yaml"
    crd.write_text(yaml.safe_dump({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusterissuers.cert-manager.io"},
        "spec": {"group": "cert-manager.io", "scope": "Cluster", "versions": [],
                 "names": {"kind": "ClusterIssuer", "plural": "clusterissuers"}},
    }))  # fmt: skip
    cr.write_text(yaml.safe_dump_all([
        {"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
         "metadata": {"name": "letsencrypt", "namespace": "ignored"}, "spec": {"acme": {}}},
        {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",  # no CRD: namespaced
         "metadata": {"name": "tls"}, "spec": {"secretName": "tls"}},
    ]))  # fmt: skip
    assert invoke(redis_url, "apply", "-f", str(crd)).exit_code == 0
    applied = invoke(redis_url, "apply", "-f", str(cr))
    assert applied.exit_code == 0, applied.output
    store = Store(r, Keys("test"))
    issuer = store.get("ClusterIssuer.cert-manager.io", "letsencrypt")
    assert issuer is not None and "namespace" not in issuer["metadata"]
    assert issuer["kind"] == "ClusterIssuer" and issuer["apiVersion"] == "cert-manager.io/v1"
    assert store.get("Certificate.cert-manager.io", "default/tls") is not None
    # Stored kinds stay away from the queue's handlers (storeevent.lua's queue_kind).
    assert r.xlen(Keys("test").queue_events) == 0


def test_namespaces_as_kubectl_applies_them(
    r: redis.Redis, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects that name no namespace go to -n's, else the current namespace; with -n, one
    that names another refuses the file (kubectl's message); cluster-scoped kinds and
    custom resources of a cluster-scoped definition stay without one."""
    monkeypatch.delenv("DISTSCHED_NAMESPACE", raising=False)
    docs = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
         "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api"},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "api"}},
                  "template": {"metadata": {"labels": {"app": "api"}},
                               "spec": {"containers": [{"name": "c", "image": "api"}]}}}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "reader"}, "rules": []},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}},
    ]  # fmt: skip
    file = tmp_path / "app.yaml"
    file.write_text(yaml.safe_dump_all(docs))
    store = Store(r, Keys("test"))

    result = invoke(redis_url, "apply", "-f", str(file), "-n", "shop")
    assert result.exit_code == 0, result.output
    for kind, key in (
        ("ConfigMap", "shop/settings"),
        ("Pod", "shop/web"),
        ("Deployment", "shop/api"),
    ):
        assert store.get(kind, key) is not None, key
    assert store.get("ClusterRole", "reader")["metadata"].get("namespace") in (None, "")
    assert store.get("Pod", "default/web") is None

    monkeypatch.setenv("DISTSCHED_NAMESPACE", "staging")
    assert invoke(redis_url, "apply", "-f", str(file)).exit_code == 0
    assert store.get("Pod", "staging/web") is not None

    elsewhere = tmp_path / "elsewhere.yaml"
    docs[1]["metadata"]["namespace"] = "prod"
    elsewhere.write_text(yaml.safe_dump_all(docs))
    refused = invoke(redis_url, "apply", "-f", str(elsewhere), "-n", "shop")
    assert refused.exit_code == 2
    assert refused.stderr.strip() == (
        f"error: {elsewhere}: document 2 (Pod prod/web): metadata.namespace: the namespace "
        'from the provided object "prod" does not match the namespace "shop". You must pass '
        "'--namespace=prod' to perform this operation."
    )
    assert store.get("Pod", "prod/web") is None  # nothing of the file written
    # without -n, a namespace in the file wins over the current one
    assert invoke(redis_url, "apply", "-f", str(elsewhere)).exit_code == 0
    assert store.get("Pod", "prod/web") is not None

    deleted = invoke(redis_url, "delete", "-f", str(file), "-n", "shop")
    assert deleted.exit_code == 0, deleted.output
    assert store.get("Pod", "shop/web") is None and store.get("Pod", "staging/web") is not None
