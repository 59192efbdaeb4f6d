"""Least-privilege Redis ACL users per role: the exact ``ACL SETUSER`` arguments that
docs/reliability.md prints and test_security.py proves sufficient (no ACL LOG denial in
a scheduling run) and tight (FLUSHALL, CONFIG and foreign keys refused).

How the lists were found: ``INFO commandstats`` after running each role alone on a
private server (it counts commands run inside Lua scripts too, and a script runs with its
caller's permissions), plus every ``redis.call`` in distsched/lua/*.lua, then confirmed by
an empty ``ACL LOG`` after a full run with these users.
"""

from __future__ import annotations

CONNECTION = "+ping +hello +select +client|setinfo +client|setname +client|getname"
# Every command the Lua scripts call: workers run all of them, binders most.
LUA = (
    "+evalsha +script|load "
    "+del +get +hdel +hexists +hget +hgetall +hincrby +hlen +hmget +hset +incr +incrby "
    "+ltrim +rpush +sadd +scard +set +smembers +srem +type +xadd +zadd +zcard +zmscore +zpopmin "
    "+zrange +zrangebyscore +zrem +zremrangebyscore +zscore"
)
# rq's side of a binding job: enqueue (workers) and dequeue/heartbeat/finish (binders).
# rq reads the server version with INFO before it enqueues or works.
RQ_ENQUEUE = "+info +multi +exec +watch +unwatch +exists +expire +persist"
# rq dequeues with BLMOVE on Redis >= 6.2 and BLPOP/LPOP otherwise (it decides by INFO).
RQ_WORKER = (
    f"{RQ_ENQUEUE} +blmove +lmove +blpop +lpop +lrange +lrem +hincrbyfloat +client|info "
    "+subscribe +unsubscribe"
)

# Replica acknowledgement (distsched.replication): the marker INCR (in LUA) and WAIT.
REPLICATION = "+wait"

ROLE_COMMANDS = {
    "worker": f"{CONNECTION} {LUA} {REPLICATION} {RQ_ENQUEUE} +blpop "
    "+xread +xreadgroup +xack +xautoclaim +xgroup|create +xgroup|createconsumer +xrange",
    "binder": f"{CONNECTION} {LUA} {REPLICATION} {RQ_WORKER}",
    "operator": f"{CONNECTION} +multi +exec +get +hget +hgetall +hmget +hkeys +hlen +zcard "
    "+zrange +zrangebyscore +zscore +zmscore +scard +smembers +llen +lrange +xlen +xrange "
    "+xrevrange +type +ttl",
}


def setuser_args(role: str, password: str, scheduler: str = "default") -> list[str]:
    """``ACL SETUSER <role> ...`` arguments: reset, a password, the role's commands, and
    only the deployment's keys (``%R~`` = read-only keys for the operator) and rq's."""
    tag = "{ds:" + scheduler + "}:*"
    if role == "operator":
        keys = [f"%R~{tag}", "%R~rq:*", "resetchannels"]
    else:
        keys = [f"~{tag}", "~rq:*", "resetchannels", "&rq:*"]
    return [role, "reset", "on", f">{password}", *keys, *ROLE_COMMANDS[role].split()]


def setuser_line(role: str, password: str = "<password>", scheduler: str = "default") -> str:
    return "ACL SETUSER " + " ".join(setuser_args(role, password, scheduler))
