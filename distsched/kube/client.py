"""A small client of the Kubernetes API: list, watch, create, patch, delete, bind.

Built on httpx, over a pool of keep-alive HTTP/1.1 connections (httpx's synchronous
HTTP/2 is not safe for requests from many threads at once: the API server answered
concurrent streams with PROTOCOL_ERROR), and msgspec's JSON codec (the fastest decoder
measured for pod lists and watch events; see BENCHMARKS.md). Objects are plain dicts, as
the store keeps them: no generated model classes (the official client's models cost ~10x
the decoding).

Thread-safe: one :class:`KubeClient` serves a process's threads (the bridge's watches, the
binder's concurrent bindings). Errors are :class:`ApiError`, whose message is one line
naming the verb, the resource and the API server's reason (for an RBAC denial:
``forbidden: create pods/binding in namespace default: User "x" cannot ...``).
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import socket
import ssl
import threading
import time
from collections.abc import Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec

from distsched.kube.config import KubeConfig

log = logging.getLogger(__name__)

Obj = dict[str, Any]

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode

TOKEN_REREAD_S = 60.0
LIST_PAGE = 500
WATCH_TIMEOUT_S = 300  # the server ends a watch after this; the reflector opens a new one


class ApiError(Exception):
    """The API server refused a request (or could not be reached: status 0)."""

    def __init__(self, status: int, reason: str, message: str, *, verb: str, what: str) -> None:
        self.status = status
        self.reason = reason
        self.api_message = message
        self.verb = verb
        self.what = what
        super().__init__(self.line())

    def line(self) -> str:
        reason = self.reason.lower() if self.reason else f"HTTP {self.status}"
        text = self.api_message.replace("\n", " ")
        return (
            f"{reason}: {self.verb} {self.what}: {text}"
            if text
            else f"{reason}: {self.verb} {self.what}"
        )

    @property
    def gone(self) -> bool:
        """410 Gone: the resourceVersion asked for is too old (relist)."""
        return self.status == 410

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource of the API: group/version, plural, namespaced."""

    api: str  # "v1" for the core group, else "group/version"
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        root = "/api/v1" if self.api == "v1" else f"/apis/{self.api}"
        out = root
        if self.namespaced and namespace is not None:
            out += f"/namespaces/{namespace}"
        out += f"/{self.plural}"
        if name is not None:
            out += f"/{name}"
        if sub:
            out += f"/{sub}"
        return out

    def describe(self, namespace: str | None, sub: str = "") -> str:
        what = f"{self.plural}/{sub}" if sub else self.plural
        return f"{what} in namespace {namespace}" if self.namespaced and namespace else what


PODS = Resource("v1", "pods", True)
NODES = Resource("v1", "nodes", False)
NAMESPACES = Resource("v1", "namespaces", False)
PRIORITY_CLASSES = Resource("scheduling.k8s.io/v1", "priorityclasses", False)
PDBS = Resource("policy/v1", "poddisruptionbudgets", True)
EVENTS = Resource("events.k8s.io/v1", "events", True)
LEASES = Resource("coordination.k8s.io/v1", "leases", True)


class WatchCancel:
    """Ends a watch that another thread is blocked reading (its response is closed)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reply: httpx.Response | None = None
        self.cancelled = False

    def attach(self, reply: httpx.Response) -> bool:
        """Called by the watch; False when cancelled already (the watch ends at once)."""
        with self._lock:
            self._reply = reply
            return not self.cancelled

    def detach(self) -> None:
        with self._lock:
            self._reply = None

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            reply = self._reply
        if reply is not None:
            # Closing the response does not wake a thread blocked reading its socket:
            # shutting the socket down does (the read sees the end of the stream).
            stream = reply.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def reset(self) -> None:
        with self._lock:
            self.cancelled = False


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    obj: Obj


class KubeClient:
    def __init__(
        self,
        config: KubeConfig,
        *,
        http2: bool = False,
        timeout_s: float = 30.0,
        max_connections: int = 64,
        user_agent: str = "distsched",
    ) -> None:
        self.config = config
        self._token: str | None = None
        self._token_read = 0.0
        self._token_lock = threading.Lock()
        verify: ssl.SSLContext | bool = False
        if not config.insecure:
            verify = ssl.create_default_context(cafile=config.ca_file)
        cert = (config.client_cert, config.client_key) if config.client_cert else None
        auth = (config.username, config.password or "") if config.username else None

        def http(http2: bool, connections: int) -> httpx.Client:
            return httpx.Client(
                base_url=config.server,
                http2=http2,
                verify=verify,
                cert=cert,  # type: ignore[arg-type]
                auth=auth,
                timeout=httpx.Timeout(timeout_s),
                limits=httpx.Limits(
                    max_connections=connections, max_keepalive_connections=connections
                ),
                headers={"User-Agent": user_agent, "Accept": "application/json"},
            )

        self._http = http(http2, max_connections)
        # Watches are long streams read by blocking threads: over one shared HTTP/2
        # connection a thread waiting on a quiet stream holds the connection's read lock
        # and starves the others (httpcore's sync HTTP/2), so each watch gets a
        # connection of its own.
        self._watch_http = http(False, 64)
        self._extensions = (
            {"sni_hostname": config.tls_server_name} if config.tls_server_name else {}
        )
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()
        self._watch_http.close()

    # --- plumbing -----------------------------------------------------------------------
    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        headers = {}
        token = self._bearer()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _bearer(self) -> str | None:
        if not self.config.token_file:
            return self.config.token
        now = time.monotonic()
        with self._token_lock:
            if self._token is None or now - self._token_read > TOKEN_REREAD_S:
                self._token = self.config.bearer_token()
                self._token_read = now
            return self._token

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        what: str = "",
    ) -> Obj:
        """One request; the decoded JSON reply (``{}`` for an empty body)."""
        content = None if body is None else _encode(body)
        try:
            reply = self._http.request(
                method,
                path,
                params=params,
                content=content,
                headers=self._headers(content_type if content is not None else None),
                extensions=self._extensions,
            )
        except httpx.HTTPError as exc:
            raise ApiError(
                0,
                "Unavailable",
                str(exc) or type(exc).__name__,
                verb=_verb(method),
                what=what or path,
            ) from exc
        if reply.status_code >= 400:
            raise _error(reply.status_code, reply.content, _verb(method), what or path)
        return _decode(reply.content) if reply.content else {}

    # --- reads ----------------------------------------------------------------------------
    def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        params: dict[str, Any] | None = None,
        page: int = LIST_PAGE,
    ) -> tuple[builtins.list[Obj], str]:
        """Every object (paged with limit/continue), and the list's resourceVersion."""
        items: builtins.list[Obj] = []
        query = dict(params or {})
        query["limit"] = page
        while True:
            reply = self.request(
                "GET", resource.path(namespace), params=query, what=resource.describe(namespace)
            )
            items += reply.get("items") or []
            meta = reply.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion", ""))
            query["continue"] = token

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        return self.request(
            "GET", resource.path(namespace, name), what=resource.describe(namespace)
        )

    def watch(
        self,
        resource: Resource,
        *,
        resource_version: str,
        namespace: str | None = None,
        params: dict[str, Any] | None = None,
        timeout_s: int = WATCH_TIMEOUT_S,
        cancel: WatchCancel | None = None,
    ) -> Generator[WatchEvent, None, None]:
        """Events from ``resource_version`` on, with bookmarks, until the server ends the
        watch (after about ``timeout_s``) or another thread calls ``cancel.cancel()``.
        Raises :class:`ApiError` with ``gone`` when the version is too old (an ERROR event
        or a 410 reply): the caller relists."""
        query = {
            **(params or {}),
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_s),
        }
        what = resource.describe(namespace)
        timeout = httpx.Timeout(30.0, read=timeout_s + 30.0)
        try:
            with self._watch_http.stream(
                "GET",
                resource.path(namespace),
                params=query,
                headers=self._headers(),
                timeout=timeout,
                extensions=self._extensions,
            ) as reply:
                if reply.status_code >= 400:
                    raise _error(reply.status_code, reply.read(), "watch", what)
                if cancel is not None and not cancel.attach(reply):
                    return
                for line in reply.iter_lines():
                    if not line:
                        continue
                    event = _decode(line)
                    kind = event.get("type", "")
                    obj = event.get("object") or {}
                    if kind == "ERROR":
                        code = int(obj.get("code") or 500)
                        raise ApiError(
                            code,
                            str(obj.get("reason", "")),
                            str(obj.get("message", "")),
                            verb="watch",
                            what=what,
                        )
                    yield WatchEvent(kind, obj)
        except (httpx.HTTPError, httpx.StreamError) as exc:
            if cancel is not None and cancel.cancelled:
                return
            raise ApiError(
                0, "Unavailable", str(exc) or type(exc).__name__, verb="watch", what=what
            ) from exc
        finally:
            if cancel is not None:
                cancel.detach()

    # --- writes ---------------------------------------------------------------------------
    def create(self, resource: Resource, obj: Obj, namespace: str | None = None) -> Obj:
        return self.request(
            "POST", resource.path(namespace), body=obj, what=resource.describe(namespace)
        )

    def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        grace_period_s: int | None = None,
    ) -> Obj:
        options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            options["preconditions"] = {"uid": uid}
        if grace_period_s is not None:
            options["gracePeriodSeconds"] = grace_period_s
        return self.request(
            "DELETE",
            resource.path(namespace, name),
            body=options,
            what=resource.describe(namespace),
        )

    def patch_status(
        self, resource: Resource, name: str, patch: Obj, namespace: str | None = None
    ) -> Obj:
        """A strategic merge patch of the status subresource (conditions merge by type)."""
        return self.request(
            "PATCH",
            resource.path(namespace, name, "status"),
            body=patch,
            content_type="application/strategic-merge-patch+json",
            what=resource.describe(namespace, "status"),
        )

    def bind(self, namespace: str, name: str, node: str, uid: str | None = None) -> None:
        """POST pods/{name}/binding (kube's DefaultBinder)."""
        binding: Obj = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        if uid:
            binding["metadata"]["uid"] = uid
        self.request(
            "POST",
            PODS.path(namespace, name, "binding"),
            body=binding,
            what=PODS.describe(namespace, "binding"),
        )

    def concurrently(
        self, calls: Sequence[Any], fn: Any, *, workers: int = 16
    ) -> builtins.list[Any]:
        """``fn(call)`` for every call, ``workers`` at a time over the shared connection(s);
        each result is the return value or the exception raised."""
        if len(calls) <= 1:
            return [_outcome(fn, call) for call in calls]
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(workers, thread_name_prefix="kube-client")
        return list(self._pool.map(lambda call: _outcome(fn, call), calls))


def _outcome(fn: Any, call: Any) -> Any:
    try:
        return fn(call)
    except ApiError as exc:
        return exc


def _verb(method: str) -> str:
    return {
        "GET": "get",
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete",
    }.get(method, method.lower())


def _error(status: int, body: bytes, verb: str, what: str) -> ApiError:
    reason, message = "", ""
    try:
        status_obj = _decode(body)
        if isinstance(status_obj, dict):
            reason = str(status_obj.get("reason", ""))
            message = str(status_obj.get("message", ""))
    except msgspec.DecodeError:
        message = body[:200].decode(errors="replace")
    return ApiError(status, reason, message, verb=verb, what=what)
