"""Least-privilege Redis ACL users, one per role: the ``ACL SETUSER`` lines that
``distsched acl`` prints for a given server and tests/reliability/test_security.py proves
sufficient (no ACL LOG denial in a scheduling run) and tight (FLUSHALL, CONFIG and foreign
keys refused), on Redis 7.0 and on valkey.

How the lists were found: ``INFO commandstats`` after running each role alone on a
private server (it counts commands run inside Lua scripts too, and a script runs with its
caller's permissions), plus every ``redis.call`` in distsched/lua/*.lua, then confirmed by
an empty ``ACL LOG`` after a full run with these users.

A command that appeared in a later server version goes into :data:`SINCE` as well: a
server refuses the whole ``ACL SETUSER`` when one of its commands is unknown (Redis 7.0
has no ``CLIENT SETINFO``, which redis-py sends on connect; a 7.0 server answers it with
"unknown subcommand", which is no ACL denial). To give a role a new command, add it to
the group it belongs to below (and to :data:`SINCE` when it is newer than Redis 7.0).
"""

from __future__ import annotations

import re

import redis

from distsched.keys import DEFAULT_SCHEDULER

Version = tuple[int, int, int]

OLDEST_SUPPORTED: Version = (7, 0, 0)
NEWEST: Version = (999, 0, 0)
"""What :func:`role_commands` assumes when it is not told the server's version."""

# INFO: distsched.connection asks each new connection's server for its run_id.
CONNECTION = (
    "ping", "hello", "select", "client|setinfo", "client|setname", "client|getname", "info",
)  # fmt: skip
# Every command the Lua scripts call: workers run all of them, binders most.
LUA = (
    "evalsha", "script|load",
    "del", "get", "hdel", "hexists", "hget", "hgetall", "hincrby", "hlen", "hmget", "hset",
    "incr", "incrby", "ltrim", "rpush", "sadd", "scard", "set", "smembers", "srem", "type",
    "xadd", "xrange", "xtrim",
    "zadd", "zcard", "zmscore", "zrange", "zrangebyscore", "zrem", "zremrangebyrank",
    "zremrangebyscore", "zscore",
)  # fmt: skip
# Replica acknowledgement (distsched.replication): the marker INCR (in LUA) and WAIT.
REPLICATION = ("wait",)
# rq's side of a binding job: enqueue (workers) and dequeue/heartbeat/finish (binders).
# rq reads the server version with INFO before it enqueues or works.
RQ_ENQUEUE = ("info", "multi", "exec", "watch", "unwatch", "exists", "expire", "persist")
# rq dequeues with BLMOVE on Redis >= 6.2 and BLPOP/LPOP otherwise (it decides by INFO).
RQ_WORKER = (
    *RQ_ENQUEUE,
    "blmove", "lmove", "blpop", "lpop", "lrange", "lrem", "hincrbyfloat", "client|info",
    "subscribe", "unsubscribe",
)  # fmt: skip
# The worker's own commands: the wake list, the store's event stream (every informer) and
# the queue's events (a consumer group); then its periodic maintenance: trimming the
# streams by what their readers have read (store/trim.py), the consistency sweep's scans
# (scan.py), and the live workers (the consumers of the queue's events) among which it
# takes its share of the nodes for tie-breaks; a preemptor's victims are deleted by
# pipelined scripts (store/redis_store.py delete_pods), for which redis-py asks SCRIPT EXISTS.
WORKER = (
    "blpop", "xread", "xreadgroup", "xack", "xautoclaim", "xgroup|create",
    "xgroup|createconsumer", "xrange",
    "xtrim", "xinfo|groups", "xinfo|consumers", "xpending", "hscan", "script|exists",
)  # fmt: skip
# The workload controller: its informer reads the store's event stream (XRANGE when it
# checks for a gap) and lists the store in one MULTI; it writes through the store's
# scripts and holds its lease with one (controller_lease.lua).
CONTROLLER = ("xread", "xrange", "multi", "exec")
# The kube bridge: the store's scripts, listings in one MULTI, and its writes fenced by
# WATCH on its lease (store/mirror.py: a transaction that runs scripts, for which redis-py
# asks SCRIPT EXISTS first).
KUBE_BRIDGE = ("multi", "exec", "watch", "unwatch", "script|exists")
# The operator's CLI (queue, get, explain): reads only.
OPERATOR = (
    "multi", "exec", "get", "hget", "hgetall", "hmget", "hkeys", "hlen", "zcard", "zrange",
    "zrangebyscore", "zscore", "zmscore", "scard", "smembers", "llen", "lrange", "xlen",
    "xrange", "xrevrange", "type", "ttl",
)  # fmt: skip

ROLE_COMMANDS: dict[str, tuple[str, ...]] = {
    "worker": (*CONNECTION, *LUA, *REPLICATION, *RQ_ENQUEUE, *WORKER),
    "binder": (*CONNECTION, *LUA, *REPLICATION, *RQ_WORKER),
    "controller": (*CONNECTION, *LUA, *REPLICATION, *CONTROLLER),
    "kube-bridge": (*CONNECTION, *LUA, *REPLICATION, *KUBE_BRIDGE),
    "operator": (*CONNECTION, *OPERATOR),
}
ROLES = tuple(ROLE_COMMANDS)

SINCE: dict[str, Version] = {"client|setinfo": (7, 2, 0)}
"""Commands newer than :data:`OLDEST_SUPPORTED`, with the server version that has them
(valkey reports the Redis version it is compatible with, 7.2.4 for valkey 7 to 9)."""

_VERSION_RE = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def parse_version(text: str) -> Version:
    """``"7.0"`` or ``"7.2.4"`` as a tuple; ValueError for anything else."""
    match = _VERSION_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a server version: {text!r} (expected e.g. 7.0 or 7.2.4)")
    major, minor, patch = (int(part or 0) for part in match.groups())
    return major, minor, patch


def server_version(client: redis.Redis) -> Version:
    """The server's ``redis_version`` from ``INFO server``."""
    info = client.info("server")
    return parse_version(str(info["redis_version"]))


def role_commands(role: str, version: Version = NEWEST) -> list[str]:
    """The commands of ``role`` that a server of ``version`` knows, in list order."""
    if role not in ROLE_COMMANDS:
        raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
    if version < OLDEST_SUPPORTED:
        shown = ".".join(map(str, version))
        raise ValueError(f"Redis {shown} is too old: distsched needs Redis 7.0 or later")
    known = [c for c in ROLE_COMMANDS[role] if SINCE.get(c, OLDEST_SUPPORTED) <= version]
    return list(dict.fromkeys(known))  # a command in two of the role's groups, once


def setuser_args(
    role: str,
    password: str,
    *,
    scheduler: str = DEFAULT_SCHEDULER,
    version: Version = NEWEST,
) -> list[str]:
    """``ACL SETUSER <role> ...`` arguments: reset, a password, the role's commands, and
    only the deployment's keys (``%R~`` = read-only keys for the operator) and rq's."""
    tag = "{ds:" + scheduler + "}:*"
    if role == "operator":
        keys = [f"%R~{tag}", "%R~rq:*", "resetchannels"]
    else:
        keys = [f"~{tag}", "~rq:*", "resetchannels", "&rq:*"]
    commands = [f"+{c}" for c in role_commands(role, version)]
    return [role, "reset", "on", f">{password}", *keys, *commands]


def setuser_line(
    role: str,
    password: str = "<password>",
    *,
    scheduler: str = DEFAULT_SCHEDULER,
    version: Version = NEWEST,
) -> str:
    """One ``ACL SETUSER`` command line (redis-cli takes it as is)."""
    return "ACL SETUSER " + " ".join(
        setuser_args(role, password, scheduler=scheduler, version=version)
    )
