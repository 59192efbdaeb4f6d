"""rq without pickle and without arbitrary imports.

rq stores a job's ``(func_name, instance, args, kwargs)`` with the queue's serializer and,
on the worker, imports ``func_name`` and the names of the job's success/failure/stopped
callbacks, and sends the job's webhooks. Anyone who can write to Redis could use each of
those to run code or make requests from a binder, so the binder pool runs rq with:

- :class:`MsgpackSerializer`: msgpack only, ext types refused. A payload that is not plain
  msgpack (a pickle, say) fails to decode, and rq fails the job without running anything.
- a job class from :func:`allow_list_job_class`: ``func`` is looked up in a plain dict of
  allowed functions, never imported; a job naming any other function, a bound instance,
  callbacks or webhooks is refused (logged, failed, never retried).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import msgpack
from rq.job import Job

log = logging.getLogger(__name__)


class RefusedJob(Exception):
    """A job outside what the binder pool runs: unknown function, instance, callbacks."""


def _refuse_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack ext type {code} is not accepted")


class MsgpackSerializer:
    """rq's serializer protocol (``dumps``/``loads``) over plain msgpack."""

    @staticmethod
    def dumps(obj: Any) -> bytes:
        return msgpack.packb(obj, use_bin_type=True)

    @staticmethod
    def loads(data: bytes) -> Any:
        # strict_map_key=False: rq's meta dicts may use non-str keys.
        return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=_refuse_ext)


class AllowListJob(Job):
    """A job that runs only functions of :attr:`allowed` (empty here: enqueue side only)."""

    allowed: ClassVar[Mapping[str, Callable[..., Any]]] = MappingProxyType({})
    _refusal: str = ""

    def restore(self, raw_data: Any) -> None:
        super().restore(raw_data)
        # rq imports callback names and sends webhooks on its own; binder jobs have neither.
        reasons = []
        for kind in ("success", "failure", "stopped"):
            attr = f"_{kind}_callback_name"
            if getattr(self, attr):
                reasons.append(f"{kind} callback {getattr(self, attr)!r}")
                setattr(self, attr, None)
        if self.webhooks:
            reasons.append(f"{len(self.webhooks)} webhook(s)")
            self.webhooks = []
        if reasons:
            self._refusal = "carries " + ", ".join(reasons)

    @property
    def func(self) -> Callable[..., Any]:
        # func_name is read first: an undecodable payload raises rq's DeserializationError
        # here, before anything is looked up.
        name = self.func_name
        refusal = self._refusal
        fn = self.allowed.get(name) if isinstance(name, str) else None
        if not refusal and self.instance is not None:
            refusal = "bound instance methods are not allowed"
        if not refusal and fn is None:
            refusal = f"function {name!r} is not allow-listed"
        if refusal or fn is None:
            log.error("refused job %s: %s", self.id, refusal)
            self.retries_left = None  # a refused job is never retried
            raise RefusedJob(f"job {self.id}: {refusal}")
        return fn


def allow_list_job_class(allowed: Mapping[str, Callable[..., Any]]) -> type[AllowListJob]:
    """A job class that runs exactly the functions of ``allowed`` (name -> function)."""
    frozen = MappingProxyType(dict(allowed))
    return type("BinderJob", (AllowListJob,), {"allowed": frozen})
