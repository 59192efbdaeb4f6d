"""docker-compose.yml and deploy/ against the real CLI and the real metrics (no Docker
engine needed): every service command parses, Prometheus scrapes every replica's port,
Grafana only charts metrics that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import pytest
import redis
import yaml
from click.testing import CliRunner

from distsched.cli import main
from tests.ops.scrape import exposed_families

ROOT = Path(__file__).resolve().parents[2]
# ``${VAR:-default}`` and ``${VAR:+alternative}`` as compose resolves them with VAR unset
# (the `ha` profile's URL override, the `kube` profile's kubeconfig).
COMPOSE = yaml.safe_load(
    re.sub(
        r"\$\{\w+:\+[^}]*\}",
        "",
        re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", (ROOT / "docker-compose.yml").read_text()),
    )
)
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
PROMETHEUS = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
DASHBOARD = json.loads((ROOT / "deploy" / "grafana" / "dashboards" / "distsched.json").read_text())


def distsched_services() -> dict[str, dict[str, Any]]:
    """Services that run the project's image (the Dockerfile's entrypoint is `distsched`)."""
    return {
        name: svc
        for name, svc in SERVICES.items()
        if "build" in svc or str(svc.get("image", "")).startswith("distsched")
    }


def option(command: list[str], flag: str, default: str | None = None) -> str | None:
    return command[command.index(flag) + 1] if flag in command else default


def metrics_ports(command: list[str]) -> set[int]:
    """Ports a role serves /metrics on: a binder pool's child i serves port + i."""
    port = int(option(command, "--metrics-port", "0") or 0)
    if not port:
        return set()
    processes = int(option(command, "--processes", "1") or 1) if command[0] == "binder" else 1
    return {port + i for i in range(processes)}


def test_the_image_runs_the_distsched_command() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    entrypoint = re.search(r"^ENTRYPOINT\s+(\[.*\])\s*$", dockerfile, re.M)
    assert entrypoint and json.loads(entrypoint.group(1)) == ["distsched"]
    assert re.search(r"^RUN pip install .*\s\.(\s|$)", dockerfile, re.M)  # the project itself
    assert {"worker", "binder"} <= set(distsched_services())


@pytest.mark.parametrize("name", sorted(distsched_services()))
def test_each_service_command_parses_with_the_real_cli(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = distsched_services()[name]
    command = [str(part) for part in service["command"]]
    for key, value in service.get("environment", {}).items():
        monkeypatch.setenv(key, str(value))
    subcommand = main.get_command(click.Context(main), command[0])
    assert subcommand is not None, f"{name}: no command {command[0]!r}"
    parent = click.Context(main, info_name="distsched")
    # Parses and converts every option (unknown flags, bad ints, bad choices raise).
    with subcommand.make_context(command[0], command[1:], parent=parent) as ctx:
        url = ctx.params.get("redis_url")
    assert url == service["environment"]["DISTSCHED_REDIS_URL"], "URL from the environment"
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0, result.output
    # Metrics must be reachable from Prometheus' container, not just loopback.
    if metrics_ports(command):
        assert option(command, "--metrics-addr") == "0.0.0.0", name


def test_redis_service_keeps_an_append_only_file_and_roles_point_at_it() -> None:
    redis_command = [str(part) for part in SERVICES["redis"]["command"]]
    assert option(redis_command, "--appendonly") == "yes"
    assert any(volume.endswith(":/data") for volume in SERVICES["redis"]["volumes"])
    for name, service in distsched_services().items():
        host = re.match(
            r"rediss?://(?:[^@]*@)?([^:/]+)", service["environment"]["DISTSCHED_REDIS_URL"]
        )
        assert host and host.group(1) in SERVICES, name
        assert "redis" in service.get("depends_on", {}), name


@pytest.mark.parametrize("name", ["worker", "binder"])
def test_roles_scale_with_compose(name: str) -> None:
    """`docker compose up --scale worker=8` needs no fixed host port or container name."""
    service = SERVICES[name]
    assert "ports" not in service and "container_name" not in service


def test_prometheus_scrapes_every_replica_port_of_every_role() -> None:
    jobs = {job["job_name"]: job for job in PROMETHEUS["scrape_configs"]}
    scraped: dict[str, set[int]] = {}
    for job in jobs.values():
        for sd in job.get("dns_sd_configs", []):
            assert sd.get("type", "A") == "A"  # one record per container of the service
            for dns_name in sd["names"]:
                assert dns_name in SERVICES, f"{job['job_name']}: no service {dns_name!r}"
                scraped.setdefault(dns_name, set()).add(int(sd["port"]))
    for name, service in distsched_services().items():
        ports = metrics_ports([str(part) for part in service["command"]])
        assert ports, f"{name} serves no metrics"
        assert ports <= scraped.get(name, set()), (name, ports, scraped.get(name))
    mounts = SERVICES["prometheus"]["volumes"]
    assert "./deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounts
    assert "--config.file=/etc/prometheus/prometheus.yml" in SERVICES["prometheus"]["command"]


def test_grafana_charts_only_metrics_that_exist(r: redis.Redis) -> None:
    families = exposed_families(r)
    assert "distsched_pending_pods" in families  # the scrape-time gauges are included
    referenced = set()
    for panel in DASHBOARD["panels"]:
        assert panel["datasource"]["uid"] == "prometheus", panel["title"]
        for target in panel["targets"]:
            referenced |= set(re.findall(r"\bdistsched_[a-z0-9_]+", target["expr"]))
    assert referenced
    for name in referenced:
        family = name
        for suffix in ("_bucket", "_count", "_sum"):
            base = name.removesuffix(suffix)
            if base != name and families.get(base) == "histogram":
                family = base
        assert family in families, f"the dashboard charts {name}, which no process exposes"
    for wanted in (
        "distsched_schedule_attempts_total",
        "distsched_pending_pods",
        "distsched_scheduling_attempt_duration_seconds_bucket",
        "distsched_reserve_conflicts_total",
    ):
        assert wanted in referenced, wanted


def test_grafana_provisioning_matches_the_compose_mounts() -> None:
    provisioning = ROOT / "deploy" / "grafana" / "provisioning"
    datasources = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())
    source = datasources["datasources"][0]
    assert source["uid"] == "prometheus" and source["url"] == "http://prometheus:9090"
    assert "prometheus" in SERVICES
    providers = yaml.safe_load((provisioning / "dashboards" / "distsched.yml").read_text())
    dashboards_path = providers["providers"][0]["options"]["path"]
    mounts = dict(
        volume.rsplit(":", 2)[:2] if volume.endswith(":ro") else volume.split(":", 1)
        for volume in SERVICES["grafana"]["volumes"]
    )
    assert mounts["./deploy/grafana/dashboards"] == dashboards_path
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    for source_path in mounts:
        assert (ROOT / source_path).exists(), source_path
