"""bench/lua_costs: the Lua building blocks are timed on the server and leave nothing."""

from __future__ import annotations

import redis

from distsched.bench.lua_costs import PREFIX, PROBES, measure


def test_every_probe_runs_and_is_costed_without_leaving_keys(r: redis.Redis) -> None:
    # Enough loops that a probe's time stands above the empty loop's jitter: with 200, a
    # call of ~0.3 µs (HLEN on a fast server) came out as 0 under CI's load.
    costs = measure(r, loops=2000)
    assert list(costs) == [p.name for p in PROBES]
    assert all(ns >= 0 for ns in costs.values())
    hgetall = next(ns for name, ns in costs.items() if "HGETALL" in name)
    hlen = next(ns for name, ns in costs.items() if "HLEN" in name)
    assert hgetall > hlen >= 0  # 24 values back cost more than one
    assert not list(r.scan_iter(match=PREFIX + "*"))
