"""A small client of the Kubernetes API: list, watch, create, patch, delete, bind.

Built on aiohttp, over a pool of keep-alive connections, with msgspec's JSON codec. The
choice was measured (BENCHMARKS.md, "Client library"): for pod bindings from one process,
aiohttp took ~280 µs of client CPU per binding where httpx took ~820 (threads) to ~1,400
(asyncio, HTTP/2) and urllib3 ~620, and bound the most per second; msgspec decodes a pod
list as fast as the fastest JSON decoder and ~10x faster than the official client's models.
Objects are plain dicts, as the store keeps them.

The client runs its own event loop on a background thread, so synchronous code (the roles
are synchronous) calls it like a blocking client and many requests still run at once:
:meth:`KubeClient.request_many` sends a batch concurrently (the binder's bindings), and
:meth:`KubeClient.run` runs a coroutine of the caller's on the loop (the bench's
create-then-bind per pod). A watch is a synchronous iterator fed by a task on the loop.

Errors are :class:`ApiError`, whose message is one line naming the verb, the resource and
the API server's reason (for an RBAC denial: ``forbidden: create pods/binding in namespace
default: User "x" cannot ...``); status 0 means the API server could not be reached.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import queue
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import msgspec

from distsched.kube.config import KubeConfig

log = logging.getLogger(__name__)

Obj = dict[str, Any]
T = TypeVar("T")

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode

TOKEN_REREAD_S = 60.0
LIST_PAGE = 500
WATCH_TIMEOUT_S = 300  # the server ends a watch after this; the reflector opens a new one
READ_BUFFER = 1 << 22  # the longest watch line (one object) the client takes
VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


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
        head = f"{reason}: {self.verb} {self.what}"
        return f"{head}: {text}" if text else head

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
        out = "/api/v1" if self.api == "v1" else f"/apis/{self.api}"
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
PVCS = Resource("v1", "persistentvolumeclaims", True)
PVS = Resource("v1", "persistentvolumes", False)
STORAGE_CLASSES = Resource("storage.k8s.io/v1", "storageclasses", False)
CSI_NODES = Resource("storage.k8s.io/v1", "csinodes", False)
CSI_DRIVERS = Resource("storage.k8s.io/v1", "csidrivers", False)
CSI_CAPACITIES = Resource("storage.k8s.io/v1", "csistoragecapacities", True)


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a batch (:meth:`KubeClient.request_many`)."""

    method: str
    path: str
    body: Any = None
    params: dict[str, str] | None = None
    content_type: str = "application/json"
    what: str = ""


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    obj: Obj


class WatchCancel:
    """Ends a watch another thread is reading (the watch's task on the loop is cancelled)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stop: Any = None
        self.cancelled = False

    def attach(self, stop: Any) -> bool:
        """Called by the watch with a callable that stops it; False when cancelled
        already (the watch ends at once)."""
        with self._lock:
            self._stop = stop
            return not self.cancelled

    def detach(self) -> None:
        with self._lock:
            self._stop = None

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            stop = self._stop
        if stop is not None:
            stop()

    def reset(self) -> None:
        with self._lock:
            self.cancelled = False


_END = object()


class KubeClient:
    def __init__(
        self,
        config: KubeConfig,
        *,
        timeout_s: float = 30.0,
        max_connections: int = 64,
        user_agent: str = "distsched",
    ) -> None:
        self.config = config
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._max_connections = max_connections
        self._user_agent = user_agent
        self._token: str | None = None
        self._token_read = 0.0
        self._token_lock = threading.Lock()
        self._ssl: ssl.SSLContext | bool = False
        if not config.insecure:
            context = ssl.create_default_context(cafile=config.ca_file)
            if config.client_cert and config.client_key:
                context.load_cert_chain(config.client_cert, config.client_key)
            self._ssl = context
        self._auth = (
            aiohttp.BasicAuth(config.username, config.password or "") if config.username else None
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="kube-client", daemon=True
        )
        self._thread.start()
        self._session: aiohttp.ClientSession = self._submit(self._open()).result()

    async def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=self._max_connections, ssl=self._ssl)
        return aiohttp.ClientSession(
            base_url=self.config.server,
            connector=connector,
            auth=self._auth,
            headers={"User-Agent": self._user_agent, "Accept": "application/json"},
            timeout=self._timeout,
            read_bufsize=READ_BUFFER,
        )

    def close(self) -> None:
        if self._loop.is_closed():
            return
        with contextlib.suppress(Exception):  # closing what may be broken already
            self._submit(self._session.close()).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    # --- the loop -------------------------------------------------------------------------
    def _submit(self, coro: Awaitable[T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]

    def call_soon(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` on the client's loop, without waiting for it (it may start
        tasks there: writes nobody waits for, such as events)."""
        self._loop.call_soon_threadsafe(callback)

    def run(self, coro: Awaitable[T]) -> T:
        """Run a coroutine of the caller's on the client's loop and wait for it (it may
        use :meth:`arequest` and await many requests at once)."""
        return self._submit(coro).result()

    # --- plumbing -------------------------------------------------------------------------
    def _headers(self, content_type: str | None) -> dict[str, str]:
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

    def _extra(self) -> dict[str, Any]:
        return (
            {"server_hostname": self.config.tls_server_name} if self.config.tls_server_name else {}
        )

    async def arequest(self, req: Request) -> Obj:
        """One request, on the client's loop; the decoded JSON reply (``{}`` if empty)."""
        data = await self._araw(req)
        return _decode(data) if data else {}

    async def _araw(self, req: Request) -> bytes:
        """One request, on the client's loop; the reply's body as sent."""
        content = None if req.body is None else _encode(req.body)
        verb, what = VERBS.get(req.method, req.method.lower()), req.what or req.path
        try:
            async with self._session.request(
                req.method,
                req.path,
                params=req.params,
                data=content,
                headers=self._headers(req.content_type if content is not None else None),
                **self._extra(),
            ) as reply:
                data = await reply.read()
                if reply.status >= 400:
                    raise _error(reply.status, data, verb, what)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _unavailable(exc, verb, what) from exc
        return data

    def get_text(self, path: str) -> str:
        """GET a plain-text endpoint of the API server (``/metrics``)."""
        return self.run(self._araw(Request("GET", path))).decode()

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
        """One request, waited for; the decoded JSON reply (``{}`` for an empty body)."""
        params = {k: str(v) for k, v in params.items()} if params else None
        return self.run(self.arequest(Request(method, path, body, params, content_type, what)))

    def request_many(
        self, requests: Sequence[Request], *, concurrency: int = 32
    ) -> builtins.list[Obj | ApiError]:
        """Send ``requests`` at most ``concurrency`` at a time; one result per request, in
        order: the reply, or the :class:`ApiError` it got."""

        async def all_of() -> builtins.list[Obj | ApiError]:
            gate = asyncio.Semaphore(concurrency)

            async def one(req: Request) -> Obj | ApiError:
                async with gate:
                    try:
                        return await self.arequest(req)
                    except ApiError as exc:
                        return exc

            return await asyncio.gather(*(one(r) for r in requests))

        return self.run(all_of()) if requests else []

    # --- reads ------------------------------------------------------------------------------
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
        query = {k: str(v) for k, v in (params or {}).items()}
        query["limit"] = str(page)
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
        what = resource.describe(namespace)
        return self.request("GET", resource.path(namespace, name), what=what)

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
        query = {k: str(v) for k, v in (params or {}).items()}
        query.update(
            watch="1",
            resourceVersion=resource_version,
            allowWatchBookmarks="true",
            timeoutSeconds=str(timeout_s),
        )
        what = resource.describe(namespace)
        events: queue.Queue[Any] = queue.Queue()

        async def read() -> None:
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=timeout_s + 30)
            try:
                async with self._session.get(
                    resource.path(namespace),
                    params=query,
                    headers=self._headers(None),
                    timeout=timeout,
                    **self._extra(),
                ) as reply:
                    if reply.status >= 400:
                        events.put(_error(reply.status, await reply.read(), "watch", what))
                        return
                    async for line in reply.content:
                        if line.strip():
                            events.put(line)
            except asyncio.CancelledError:
                pass
            except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
                events.put(_unavailable(exc, "watch", what))
            finally:
                events.put(_END)

        task = self._submit(read())

        def stop() -> None:
            task.cancel()

        try:
            if cancel is not None and not cancel.attach(stop):
                return
            while True:
                item = events.get()
                if item is _END:
                    return
                if isinstance(item, ApiError):
                    raise item
                event = _decode(item)
                kind = event.get("type", "")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    code = int(obj.get("code") or 500)
                    reason, message = str(obj.get("reason", "")), str(obj.get("message", ""))
                    raise ApiError(code, reason, message, verb="watch", what=what)
                yield WatchEvent(kind, obj)
        finally:
            stop()
            if cancel is not None:
                cancel.detach()

    # --- writes -------------------------------------------------------------------------
    def create(self, resource: Resource, obj: Obj, namespace: str | None = None) -> Obj:
        return self.run(self.arequest(create_request(resource, obj, namespace)))

    def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        grace_period_s: int | None = None,
    ) -> Obj:
        return self.run(
            self.arequest(delete_request(resource, name, namespace, uid, grace_period_s))
        )

    def patch_status(
        self, resource: Resource, name: str, patch: Obj, namespace: str | None = None
    ) -> Obj:
        """A strategic merge patch of the status subresource (conditions merge by type)."""
        return self.run(self.arequest(patch_status_request(resource, name, patch, namespace)))

    def bind(self, namespace: str, name: str, node: str, uid: str | None = None) -> None:
        """POST pods/{name}/binding (kube's DefaultBinder)."""
        self.run(self.arequest(binding_request(namespace, name, node, uid)))


def binding_request(namespace: str, name: str, node: str, uid: str | None = None) -> Request:
    binding: Obj = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    if uid:
        binding["metadata"]["uid"] = uid
    path = PODS.path(namespace, name, "binding")
    return Request("POST", path, binding, what=PODS.describe(namespace, "binding"))


def patch_status_request(
    resource: Resource, name: str, patch: Obj, namespace: str | None = None
) -> Request:
    """A strategic merge patch of the status subresource (conditions merge by type)."""
    return Request(
        "PATCH",
        resource.path(namespace, name, "status"),
        patch,
        content_type="application/strategic-merge-patch+json",
        what=resource.describe(namespace, "status"),
    )


def create_request(resource: Resource, obj: Obj, namespace: str | None = None) -> Request:
    return Request("POST", resource.path(namespace), obj, what=resource.describe(namespace))


def delete_request(
    resource: Resource,
    name: str,
    namespace: str | None = None,
    uid: str | None = None,
    grace_period_s: int | None = None,
) -> Request:
    options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if uid:
        options["preconditions"] = {"uid": uid}
    if grace_period_s is not None:
        options["gracePeriodSeconds"] = grace_period_s
    return Request(
        "DELETE", resource.path(namespace, name), options, what=resource.describe(namespace)
    )


def _unavailable(exc: BaseException, verb: str, what: str) -> ApiError:
    return ApiError(0, "Unavailable", str(exc) or type(exc).__name__, verb=verb, what=what)


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
