"""rq without pickle and without arbitrary imports.

rq serializes a job's ``(func_name, instance, args, kwargs)`` and its results with the
queue's serializer and resolves ``func_name`` by importing it. Both are ways to run code
through Redis, so the binder pool uses:

- :class:`MsgpackSerializer`: msgpack only; a payload that is not msgpack (a pickle, say)
  fails to decode and the job fails without running anything.
- :class:`AllowListJob`: ``func`` is looked up in :data:`ALLOWED_FUNCTIONS`, a plain dict
  filled by the binder module; any other name is refused and logged, never imported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgpack
from rq.job import Job

log = logging.getLogger(__name__)

ALLOWED_FUNCTIONS: dict[str, Callable[..., Any]] = {}


class RefusedJob(Exception):
    """A job named a function outside the allow-list, or carried a bound instance."""


class MsgpackSerializer:
    @staticmethod
    def dumps(obj: Any) -> bytes:
        return msgpack.packb(obj, use_bin_type=True)

    @staticmethod
    def loads(data: bytes) -> Any:
        # strict_map_key=False: rq's meta dicts may use non-str keys; ext types are refused.
        return msgpack.unpackb(data, raw=False, strict_map_key=False)


def allow(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a job function under a stable name."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        ALLOWED_FUNCTIONS[name] = fn
        return fn

    return register


class AllowListJob(Job):
    @property
    def func(self) -> Callable[..., Any]:
        name = self.func_name
        if self.instance is not None:
            log.error("refused job %s: bound instance methods are not allowed", self.id)
            raise RefusedJob(f"job {self.id}: instance methods are not allowed")
        fn = ALLOWED_FUNCTIONS.get(name or "")
        if fn is None:
            log.error("refused job %s: function %r is not allow-listed", self.id, name)
            raise RefusedJob(f"job {self.id}: function {name!r} is not allow-listed")
        return fn
