"""``--redis-profile``: script times from the slow log, and the commands each script ran."""

from __future__ import annotations

import redis

from distsched.bench.measure import (
    SCRIPT_CLIENT,
    ScriptProfile,
    attribute_slowlog,
    key_family,
)

CALLER = b"127.0.0.1:5000"


def entry(command: bytes, duration: int, address: bytes = CALLER) -> dict[str, object]:
    return {"command": command, "duration": duration, "client_address": address}


def test_key_family_drops_the_tag_and_folds_object_names() -> None:
    assert key_family(b"{ds:default}:store:meta:Pod") == "store:meta:Pod"
    assert key_family(b"{ds:default}:cache:node:node-00017") == "cache:node:*"
    assert key_family(b"{ds:default}:cache:pods") == "cache:pods"
    assert key_family(b"rq:job:3f0c") == "rq:job:*"


def test_a_scripts_commands_are_those_logged_just_before_it() -> None:
    names = {"a" * 40: "store_bind", "b" * 40: "queue_pop"}
    log = [
        entry(b"HMGET {ds:x}:store:meta:Pod p1 p2", 30, SCRIPT_CLIENT),
        entry(b"HSET {ds:x}:store:meta:Pod p1 m", 10, SCRIPT_CLIENT),
        entry(b"EVALSHA " + b"a" * 40 + b" 5 k", 100),
        entry(b"HGETALL rq:job:1", 7),  # the caller's own command: no script's
        entry(b"HMGET {ds:x}:q:info p3", 20, SCRIPT_CLIENT),
        entry(b"EVALSHA " + b"b" * 40 + b" 11 k", 50),
        entry(b"HMGET {ds:x}:store:meta:Pod p4", 25, SCRIPT_CLIENT),
        entry(b"EVALSHA " + b"a" * 40 + b" 5 k", 60),
    ]
    times = attribute_slowlog(log, names)
    assert times.scripts == {"store_bind": (2, 160), "queue_pop": (1, 50)}
    assert times.commands == {
        "store_bind": {"HMGET store:meta:Pod": (2, 55), "HSET store:meta:Pod": (1, 10)},
        "queue_pop": {"HMGET q:info": (1, 20)},
    }


def test_no_breakdown_where_the_log_does_not_mark_a_scripts_commands() -> None:
    # Valkey logs a script's commands under its caller's address: they cannot be told
    # from the caller's own, so the profile gives script times alone.
    log = [entry(b"HSET {ds:x}:q:info p v", 5), entry(b"EVALSHA " + b"c" * 40 + b" 1 k", 40)]
    times = attribute_slowlog(log, {})
    assert times.scripts == {"c" * 12: (1, 40)}
    assert times.commands is None


def test_profile_on_the_test_server(r: redis.Redis) -> None:
    before = r.config_get("slowlog-log-slower-than")
    profile = ScriptProfile(r).start()
    r.eval("redis.call('SET', KEYS[1], 'v'); return redis.call('GET', KEYS[1])", 1, "{p}:k")
    times = profile.stop()
    r.delete("{p}:k")
    assert times.scripts["eval"][0] == 1
    if times.commands is not None:  # Redis 7.0 marks them
        assert set(times.commands["eval"]) == {"SET k", "GET k"}  # the tag dropped
    assert r.config_get("slowlog-log-slower-than") == before
