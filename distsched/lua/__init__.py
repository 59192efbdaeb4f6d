"""Loader for the Lua scripts in this folder.

One ``.lua`` file per atomic move. Each is registered once per client with redis-py's
``register_script``: it runs by EVALSHA, reloads itself on NOSCRIPT, and runs inside a
pipeline when called with ``client=pipe``.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import redis
from redis.commands.core import Script

INCLUDE = "--!include "


@cache
def source(name: str) -> str:
    """The text of ``distsched/lua/<name>.lua``, with each ``--!include <lib>`` line
    replaced by ``distsched/lua/lib/<lib>.lua`` (Redis scripts cannot load code, so shared
    helpers are pasted in when the script is registered)."""
    root = resources.files(__package__)
    text = root.joinpath(f"{name}.lua").read_text(encoding="utf-8")
    lines = []
    for line in text.splitlines(keepends=True):
        if line.startswith(INCLUDE):
            lib = line[len(INCLUDE) :].strip()
            lines.append(root.joinpath("lib", f"{lib}.lua").read_text(encoding="utf-8"))
        else:
            lines.append(line)
    return "".join(lines)


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
