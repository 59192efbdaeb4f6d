"""Sentinel URLs in-process: parsing, redaction, the acknowledgement default, TLS option
plumbing for ``rediss+sentinel://`` (no server needed: redis-py connects lazily), and the
CLI's handling of bad Sentinel URLs and --min-replicas-ack."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import redis
import yaml
from redis.connection import SSLConnection
from redis.sentinel import SentinelManagedConnection, SentinelManagedSSLConnection

from distsched.connection import (
    RedisOptions,
    SentinelTarget,
    connect,
    is_sentinel_url,
    parse_sentinel_url,
    redact_url,
)
from distsched.launcher import tls_args
from distsched.replication import AckPolicy, policy_of
from tests.reliability.sentinels import SentinelCluster, free_port
from tests.support.waits import wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_parse_full_url() -> None:
    url = "redis+sentinel://ops:s%40cret@10.0.0.1:26379,10.0.0.2:26380,[::1]:26381/ds/3"
    assert parse_sentinel_url(url) == SentinelTarget(
        sentinels=(("10.0.0.1", 26379), ("10.0.0.2", 26380), ("::1", 26381)),
        service="ds",
        db=3,
        username="ops",
        password="s@cret",
        tls=False,
    )


def test_parse_defaults_and_options() -> None:
    target = parse_sentinel_url(
        "rediss+sentinel://:pw@s1,s2:1234/mymaster?sentinel_password=sp&sentinel_username=su"
    )
    assert target.sentinels == (("s1", 26379), ("s2", 1234))
    assert (target.service, target.db, target.tls) == ("mymaster", 0, True)
    assert (target.username, target.password) == (None, "pw")
    assert (target.sentinel_username, target.sentinel_password) == ("su", "sp")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis+sentinel://h1:1/", "no service name"),
        ("redis+sentinel:///ds/0", "no Sentinel address"),
        ("redis+sentinel://h1:99999/ds", "bad Sentinel port"),
        ("redis+sentinel://h1:x/ds", "bad Sentinel port"),
        ("redis+sentinel://h1/ds/zero", "expected .../<service>/<db>"),
        ("redis+sentinel://h1/ds/0/extra", "expected .../<service>/<db>"),
        ("redis+sentinel://u:topsecret@h1/ds?tls=1", "unknown Sentinel URL option"),
        ("redis://h1/0", "not a Sentinel URL"),
    ],
)
def test_parse_errors_name_the_problem_without_the_password(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        parse_sentinel_url(url)
    assert "topsecret" not in str(info.value)


def test_redact_hides_every_password() -> None:
    url = "redis+sentinel://ops:hunter2@h1:1,h2:2/ds/0?sentinel_password=hunter3"
    red = redact_url(url)
    assert "hunter" not in red
    assert red == "redis+sentinel://ops:***@h1:1,h2:2/ds/0?sentinel_password=***"
    assert redact_url("redis://u:p@[::1]:6379/0") == "redis://u:***@[::1]:6379/0"
    assert redact_url("redis://localhost:6379/0") == "redis://localhost:6379/0"


def test_acknowledgement_default_follows_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISTSCHED_MIN_REPLICAS_ACK", raising=False)
    assert is_sentinel_url("REDIS+SENTINEL://h/ds")
    assert RedisOptions("redis+sentinel://h/ds").ack_policy == AckPolicy(1, 1000)
    assert RedisOptions("redis://h/0").ack_policy == AckPolicy(0, 1000)
    assert RedisOptions("redis+sentinel://h/ds", min_replicas_ack=0).ack_policy.replicas == 0
    monkeypatch.setenv("DISTSCHED_MIN_REPLICAS_ACK", "2")
    assert RedisOptions.from_env("redis+sentinel://h/ds").ack_policy.replicas == 2
    assert RedisOptions.from_env("redis://h/0", min_replicas_ack=1).ack_policy.replicas == 1


def test_connect_plumbs_sentinel_and_tls_options() -> None:
    options = RedisOptions(
        "rediss+sentinel://app:pw@127.0.0.1:1,127.0.0.1:2/ds/4?sentinel_password=sp",
        ca_cert="/ca.pem",
        cert="/client.pem",
        key="/client.key",
    )
    client = connect(options)
    pool = client.connection_pool
    assert pool.connection_class is SentinelManagedSSLConnection
    kwargs = pool.connection_kwargs
    assert (kwargs["db"], kwargs["username"], kwargs["password"]) == (4, "app", "pw")
    assert kwargs["ssl_ca_certs"] == "/ca.pem"
    assert (kwargs["ssl_certfile"], kwargs["ssl_keyfile"]) == ("/client.pem", "/client.key")
    assert pool.service_name == "ds"
    sentinels = pool.sentinel_manager.sentinels
    assert [s.connection_pool.connection_kwargs["port"] for s in sentinels] == [1, 2]
    for s in sentinels:
        assert issubclass(s.connection_pool.connection_class, SSLConnection)
        assert s.connection_pool.connection_kwargs["ssl_ca_certs"] == "/ca.pem"
        assert s.connection_pool.connection_kwargs["password"] == "sp"
    assert policy_of(client) == AckPolicy(1, 1000)
    assert policy_of(client.pipeline()) == AckPolicy(1, 1000)  # same pool

    plain = connect(RedisOptions("redis+sentinel://127.0.0.1:1/ds"))
    assert plain.connection_pool.connection_class is SentinelManagedConnection
    assert "ssl_ca_certs" not in plain.connection_pool.connection_kwargs


def test_cli_refuses_a_bad_sentinel_url_and_passes_the_ack_option() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "distsched", "queue", "--redis-url", "redis+sentinel://u:pw@h1/"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "no service name" in result.stderr and "pw@" not in result.stderr
    assert tls_args(RedisOptions("redis+sentinel://h/ds", min_replicas_ack=2)) == [
        "--min-replicas-ack",
        "2",
    ]
    assert tls_args(RedisOptions("redis+sentinel://h/ds")) == []


def test_compose_ha_profile_runs_a_replica_and_three_sentinels_the_url_names(
    tmp_path: Path,
) -> None:
    """The `ha` profile's services, the Sentinel URL documented for it, and each Sentinel's
    start command run for real (hostnames swapped for loopback ports)."""
    text = (ROOT / "docker-compose.yml").read_text()
    services = yaml.safe_load(text)["services"]
    ha = {name for name, svc in services.items() if "ha" in svc.get("profiles", [])}
    assert ha == {"redis-replica", "sentinel-1", "sentinel-2", "sentinel-3"}
    replica = services["redis-replica"]["command"]
    assert replica[replica.index("--replicaof") + 1 :][:2] == ["redis", "6379"]
    documented = re.search(r"DISTSCHED_COMPOSE_REDIS_URL=(redis\+sentinel://\S+)", text)
    assert documented, "the compose file shows the Sentinel URL for the ha profile"
    target = parse_sentinel_url(documented.group(1))
    assert {host for host, _ in target.sentinels} == {"sentinel-1", "sentinel-2", "sentinel-3"}
    assert {port for _, port in target.sentinels} == {26379}
    assert "${DISTSCHED_COMPOSE_REDIS_URL:-redis://redis:6379/0}" in text  # the roles' override

    pair = SentinelCluster(tmp_path / "redis", replicas=0, sentinel_count=0).start()
    sentinel: subprocess.Popen[bytes] | None = None
    try:
        script = services["sentinel-1"]["command"][2].replace("$$", "$")
        port = free_port()
        script = script.replace("port 26379", f"port {port}")
        script = script.replace("distsched redis 6379", f"distsched 127.0.0.1 {pair.data[0].port}")
        script = script.replace("/tmp/sentinel.conf", str(tmp_path / "sentinel.conf"))
        script = script.replace("exec redis-server", f"exec {pair.binary}")
        env = {**os.environ, "SENTINEL_NAME": "127.0.0.1"}
        sentinel = subprocess.Popen(["sh", "-c", script], env=env, start_new_session=True)
        client = redis.Redis(port=port, socket_timeout=2)
        state = wait_for(
            "the compose Sentinel to start",
            lambda: client.sentinel_master(target.service),
            15,
            every=0.1,
            retry=(redis.RedisError,),
        )
        assert int(state["port"]) == pair.data[0].port
        assert state["is_master"]
    finally:
        if sentinel is not None:
            sentinel.kill()
            sentinel.wait(10)
        pair.stop()
