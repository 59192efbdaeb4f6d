"""What the Lua scripts' building blocks cost on a Redis server, in ns per operation.

The scripts' time per pod (cache_reserve, store_bind, store_create, queue_pop: nearly all
of Redis's CPU per pod, see BENCHMARKS.md "Past one Redis core") is a sum of many small
operations, none dominant: a ``redis.call``, each value converted between Lua and Redis,
each string or table a script makes. This times each kind in a loop inside one script
(the server's own EVALSHA time from INFO commandstats, over ``--loops`` iterations less
an empty loop's), so that a change to a script can be costed before it is made:

    python -m distsched.bench.lua_costs --redis-url redis://127.0.0.1:6391/9 [-o json]

It writes and then deletes a few keys named ``lua-costs:*`` in the given database.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

import redis

from distsched.output import print_table

PREFIX = "lua-costs:"


@dataclass(frozen=True)
class Probe:
    name: str
    body: str  # runs with i = 1..n; KEYS[1] a hash of 12 fields, KEYS[2] a stream


# A node's ledger hash has about this many fields (alloc, req, topo, live, gen).
HASH_FIELDS = 12

PROBES = (
    Probe("redis.call HLEN (a call, one value back)", "redis.call('HLEN', KEYS[1])"),
    Probe(
        f"redis.call HGETALL ({HASH_FIELDS} fields: {2 * HASH_FIELDS} values back)",
        "redis.call('HGETALL', KEYS[1])",
    ),
    Probe("redis.call HMGET (3 fields)", "redis.call('HMGET', KEYS[1], 'f1', 'f2', 'f3')"),
    Probe("redis.call HSET (1 field)", "redis.call('HSET', KEYS[1], 'f1', 'v')"),
    Probe("redis.call XADD (2 fields)", "redis.call('XADD', KEYS[2], '*', 'a', 'b', 'c', 'd')"),
    Probe(
        "redis.call XADD MAXLEN ~ (2 fields)",
        "redis.call('XADD', KEYS[2], 'MAXLEN', '~', 1000000, '*', 'a', 'b', 'c', 'd')",
    ),
    Probe("empty table {}", "local t = {}"),
    Probe("table of 6 named fields", "local t = {a = 1, b = 2, c = 3, d = 4, e = 5, f = 6}"),
    Probe("string concat (3 parts, one a number)", "local s = 'node' .. '=' .. i"),
    Probe("string.format('%d', n)", "local s = string.format('%d', i)"),
    Probe("tonumber(string)", "local n = tonumber('123456')"),
    Probe(
        "string.match (3 captures)",
        "local a, b, c = string.match('node-1 17 cpu=100,pods=1', '^(%S+) (%S+) (%S*)$')",
    ),
    Probe("local function call", "local n = probe_fn(i)"),
)


def _script(body: str) -> str:
    return (
        "local function probe_fn(x) return x end\n"
        "local n = tonumber(ARGV[1])\n"
        f"for i = 1, n do {body} end\n"
        "return n"
    )


def evalsha_usec(client: redis.Redis) -> int:
    """The server's EVALSHA time so far (µs, INFO commandstats)."""
    stats = client.info("commandstats").get("cmdstat_evalsha", {"usec": 0})
    return int(stats["usec"])


def _time(client: redis.Redis, sha: str, keys: list[str], loops: int) -> float:
    """Server µs of one EVALSHA of the probe's loop."""
    before = evalsha_usec(client)
    client.evalsha(sha, len(keys), *keys, loops)
    return float(evalsha_usec(client) - before)


def measure(client: redis.Redis, loops: int = 20_000) -> dict[str, float]:
    """Probe name -> ns per operation (the empty loop's cost taken off)."""
    keys = [PREFIX + "hash", PREFIX + "stream"]
    fields = [x for j in range(HASH_FIELDS) for x in (f"f{j}", str(j))]
    out: dict[str, float] = {}
    try:
        client.delete(*keys)
        client.hset(keys[0], items=fields)
        empty = _time(client, client.script_load(_script("")), keys, loops)
        for probe in PROBES:
            sha = client.script_load(_script(probe.body))
            usec = _time(client, sha, keys, loops)
            out[probe.name] = max(0.0, (usec - empty) * 1000 / loops)
            client.delete(keys[1])  # the stream probes start from an empty stream each
    finally:
        client.delete(*keys)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--loops", type=int, default=20_000)
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    args = parser.parse_args()
    client = redis.Redis.from_url(args.redis_url)
    costs = measure(client, args.loops)
    if args.output == "json":
        version = client.info("server").get("redis_version")
        print(json.dumps({"server_version": version, "ns_per_op": costs}))
        return
    print_table(
        "Lua building blocks",
        ["operation (inside a script)", "ns"],
        [[name, f"{ns:,.0f}"] for name, ns in costs.items()],
    )


if __name__ == "__main__":
    main()
