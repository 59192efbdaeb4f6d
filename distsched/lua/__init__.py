"""Loader for the Lua scripts in this folder.

One ``.lua`` file per atomic move. Each is registered once per client with redis-py's
``register_script``: it runs by EVALSHA, reloads itself on NOSCRIPT, and runs inside a
pipeline when called with ``client=pipe``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError

INCLUDE = "--!include "


@cache
def source(name: str) -> str:
    """The text of ``distsched/lua/<name>.lua``, with each ``--!include <lib>`` line
    replaced by ``distsched/lua/lib/<lib>.lua`` (Redis scripts cannot load code, so shared
    helpers are pasted in when the script is registered). A lib may include others; each
    lib is pasted once, where it is first included, so what it defines comes before every
    use."""
    root = resources.files(__package__)
    pasted: set[str] = set()

    def expand(text: str) -> str:
        lines = []
        for line in text.splitlines(keepends=True):
            if not line.startswith(INCLUDE):
                lines.append(line)
                continue
            lib = line[len(INCLUDE) :].strip()
            if lib not in pasted:
                pasted.add(lib)
                lines.append(expand(root.joinpath("lib", f"{lib}.lua").read_text("utf-8")))
        return "".join(lines)

    return expand(root.joinpath(f"{name}.lua").read_text(encoding="utf-8"))


class ScriptSet:
    """The registered scripts of one Redis client, loaded lazily by name."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._scripts: dict[str, Script] = {}

    def get(self, name: str) -> Script:
        script = self._scripts.get(name)
        if script is None:
            script = self._client.register_script(source(name))
            self._scripts[name] = script
        return script

    def run_many(
        self, name: str, calls: Sequence[tuple[Sequence[Any], Sequence[Any]]]
    ) -> list[Any]:
        """The script ``name`` once per (keys, args) of ``calls``, pipelined in one round
        trip; the replies in order. The calls must not depend on each other's order.

        redis-py asks SCRIPT EXISTS before every pipeline holding a script (a round trip
        more); here the EVALSHAs go alone, and only when the server lacks the script
        (restarted, flushed) is it loaded and the calls it refused sent again."""
        script = self.get(name)
        replies: list[Any] = [None] * len(calls)
        pending = list(range(len(calls)))
        for attempt in range(2):
            pipe = self._client.pipeline(transaction=False)
            for at in pending:
                keys, args = calls[at]
                pipe.evalsha(script.sha, len(keys), *keys, *args)
            answers = pipe.execute(raise_on_error=False)
            refused = []
            for at, answer in zip(pending, answers, strict=True):
                if isinstance(answer, NoScriptError) and not attempt:
                    refused.append(at)
                elif isinstance(answer, Exception):
                    raise answer
                else:
                    replies[at] = answer
            if not refused:
                break
            script.sha = self._client.script_load(script.script)
            pending = refused
        return replies
