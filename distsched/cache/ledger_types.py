"""Values exchanged with the cache ledger (see :mod:`distsched.cache.ledger`).

Resource amounts are integers in canonical units (cpu millicores, memory and
ephemeral-storage bytes, pods and extended resources in units), as in ``model.objects``.
A host port is ``(ip, protocol, port)``; ``normalize_ports`` applies kube-scheduler's
defaults (empty ip = ``0.0.0.0``, empty protocol = ``TCP``) and drops ports <= 0.
A topology domain is the string ``"<topologyKey>=<value>"`` (see :func:`domain`).

Scoring's non-zero requests (kube's 100m cpu / 200Mi memory for a container that names
no request) are summed per node with the requests: a pod whose non-zero cpu or memory
exceeds its request carries the difference as the pseudo-resources ``+cpu`` and
``+memory`` (:data:`NONZERO_EXTRA`; ``+`` is in no Kubernetes resource name). They add up,
are given back and reach the change feed like any request; the reserve script's fit check
skips them, and :class:`NodeUsage` / :class:`NodeState` hand them out apart
(``nonzero_extra``), not among ``requested``. A pod with explicit requests carries none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from distsched.model.quantity import MAX_AMOUNT, format_quantity, over_limit
from distsched.model.resources import DEFAULT_HOST_IP, DEFAULT_PROTOCOL, HostPort
from distsched.redis_text import as_text

PROTOCOLS = frozenset({"TCP", "UDP", "SCTP"})

NONZERO_EXTRA = ("+cpu", "+memory")
"""Pseudo-resources: what scoring's non-zero cpu / memory add over the requests."""


def nonzero_extra_requests(
    requests: Mapping[str, int], nonzero: tuple[int, int] | None
) -> dict[str, int]:
    """``requests`` plus the pseudo-resources of :data:`NONZERO_EXTRA` for a pod whose
    non-zero (cpu, memory) exceed its requests (None: they do not)."""
    if nonzero is None:
        return dict(requests)
    out = dict(requests)
    for name, resource, amount in zip(NONZERO_EXTRA, ("cpu", "memory"), nonzero, strict=True):
        extra = amount - requests.get(resource, 0)
        if extra > 0:
            out[name] = extra
    return out


def split_nonzero_extra(requested: dict[str, int]) -> tuple[int, int]:
    """Take the :data:`NONZERO_EXTRA` pseudo-resources out of ``requested`` (in place);
    returns them as (cpu, memory)."""
    cpu = requested.pop(NONZERO_EXTRA[0], 0)
    memory = requested.pop(NONZERO_EXTRA[1], 0)
    return cpu, memory


def domain(topology_key: str, value: str) -> str:
    """The name of a topology domain, e.g. ``domain("topology.kubernetes.io/zone", "a")``."""
    return f"{topology_key}={value}"


@dataclass(frozen=True, slots=True)
class LedgerConfig:
    """The ledger's timing. The backoff of pods the reaper requeues is the queue's
    (:class:`~distsched.queue_types.QueueConfig`), not the ledger's."""

    assume_ttl_ms: int = 30_000
    """How long a reservation may stay assumed before the reaper releases and requeues it;
    it must exceed the slowest binding cycle (PreBind + Bind)."""
    reap_batch: int = 256
    """Pods released per reaper script call (bounds the script's run time)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """A worker's choice of node for one popped pod, to be checked against the ledger.

    ``domain_checks`` maps domains to the generation the worker's view had for them (only
    for pods with inter-pod constraints, over the chosen node's domains of the topology
    keys they use). ``anti_affinity_gen`` is the sum of the anti-affinity generations of
    the chosen node's domains in the worker's view (``NodeState.anti_affinity_gen``);
    every decision carries it. ``anti_affinity_keys`` are the topology keys of the pod's
    own required anti-affinity terms. A worker that already counts earlier decisions of
    the same batch in its view adds their bumps (+1 per reservation on a node of the
    domain, +1 anti-affinity per key of a pod with such terms) to what it expects.
    ``nonzero`` is the pod's (cpu, memory) as scoring counts them (None: its requests).
    ``seen_pods`` is the node's pod count in the worker's view before the batch's own
    decisions (-1: not checked): refused if the ledger has more, i.e. another worker put
    pods there meanwhile (scores compare nodes by what they hold: a view that lags the
    other workers' reservations would pile pods onto the nodes that looked emptiest).
    """

    pod_key: str
    uid: str
    epoch: int
    node: str
    requests: Mapping[str, int]
    host_ports: Sequence[HostPort] = ()
    domain_checks: Mapping[str, int] = field(default_factory=dict)
    anti_affinity_gen: int = 0
    anti_affinity_keys: Sequence[str] = ()
    nonzero: tuple[int, int] | None = None
    seen_pods: int = -1


class UsageTail(NamedTuple):
    """What a node's usage record says after its generation, ``"<host ports>|<requests>"``
    parsed: nodes with the same pods have the same tail, so one parse (and one object)
    serves them all (never mutate ``requested``)."""

    host_ports: int
    """host ports in use; -1 when unknown (read :class:`NodeState` for the ports)"""
    requested: dict[str, int]
    nonzero_extra: tuple[int, int]
    """what scoring's non-zero (cpu, memory) add over ``requested``"""


def parse_usage_tail(tail: str) -> UsageTail:
    """The tail of a usage record (all after its first ``|``), parsed once per text."""
    parsed = _PARSED_TAILS.get(tail)
    if parsed is None:
        ports, _, req = tail.partition("|")
        requested = decode_requests(req)
        extra = split_nonzero_extra(requested)
        parsed = UsageTail(int(ports) if ports else 0, requested, extra)
        if len(_PARSED_TAILS) >= _PARSED_TAILS_SIZE:
            _PARSED_TAILS.clear()
        _PARSED_TAILS[tail] = parsed
    return parsed


def parse_usage_record(record: str) -> tuple[int, UsageTail]:
    """A usage record's generation and its parsed tail (``""``, a node the ledger has no
    record of: generation 0, nothing in use)."""
    gen, _, tail = record.partition("|")
    return (int(gen) if gen else 0), parse_usage_tail(tail)


# Usage records repeat but for their generation (nodes with the same pods have the same
# amounts): each tail is parsed once.
_PARSED_TAILS_SIZE = 4096
_PARSED_TAILS: dict[str, UsageTail] = {}


class NodeUsage(NamedTuple):
    """A node's usage as the change feed reports it (see cache_changes.lua); ``requested``
    is shared between usages with the same amounts (never mutate it)."""

    name: str
    generation: int
    requested: dict[str, int]
    host_ports: int
    """host ports in use; -1 when unknown (read :class:`NodeState` for the ports)"""
    nonzero_extra: tuple[int, int] = (0, 0)
    """what scoring's non-zero (cpu, memory) add over ``requested``"""

    @classmethod
    def parse(cls, name: str, record: str) -> NodeUsage:
        generation, parsed = parse_usage_record(record)
        return cls(name, generation, parsed.requested, parsed.host_ports, parsed.nonzero_extra)


@dataclass(frozen=True, slots=True)
class NodeState:
    """The ledger's view of one node (what a worker refreshes its snapshot with)."""

    name: str
    live: bool
    generation: int
    allocatable: dict[str, int]
    requested: dict[str, int]
    ports: tuple[HostPort, ...]
    domains: dict[str, str]
    """topologyKey -> value"""
    domain_gens: dict[str, int]
    """domain -> generation"""
    anti_affinity_gens: dict[str, int]
    """domain -> anti-affinity generation"""
    pods: tuple[str, ...]
    """assumed and bound pods on the node (ns/name), sorted"""
    nonzero_extra: tuple[int, int] = (0, 0)
    """what scoring's non-zero (cpu, memory) add over ``requested``"""

    @property
    def anti_affinity_gen(self) -> int:
        """What a :class:`Decision` for this node carries as ``anti_affinity_gen``."""
        return sum(self.anti_affinity_gens.values())


@dataclass(frozen=True, slots=True)
class Reserved:
    token: str


@dataclass(frozen=True, slots=True)
class Rejected:
    reason: str
    node_state: NodeState | None


@dataclass(frozen=True, slots=True)
class Stale:
    reason: str


@dataclass(frozen=True, slots=True)
class Invalid:
    """The decision itself cannot be reserved (a request beyond what the ledger can
    account, a malformed name): only this pod is refused, trying again cannot help."""

    reason: str


ReserveResult = Reserved | Rejected | Stale | Invalid


@dataclass(frozen=True, slots=True)
class PodRecord:
    pod_key: str
    node: str
    uid: str
    state: str  # "assumed" | "bound"
    requests: dict[str, int]
    ports: tuple[HostPort, ...]
    token: str
    deadline_ms: int | None  # assume deadline; None when bound
    anti_affinity_keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Difference:
    """One way the ledger disagrees with the assumed + bound pods it records."""

    node: str
    item: str  # a resource name, "port <proto|port|ip>", "member <ns/name>", "assumed <ns/name>"
    ledger: int
    expected: int


def check_count(what: str, value: object) -> int:
    """``value``, an integer the ledger's Lua scripts hold exactly (their numbers are
    doubles): 0 to the model's MAX_AMOUNT, the bound manifests are validated against."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_AMOUNT:
        raise ValueError(f"{what} must be an integer from 0 to 2^53-1, got {value!r}")
    return value


def check_name(what: str, value: object, forbidden: str = "") -> str:
    if not isinstance(value, str) or not value or any(map(value.__contains__, forbidden)):
        raise ValueError(f"{what} must be a non-empty string without {forbidden!r}: {value!r}")
    return value


def normalize_requests(requests: Mapping[str, int]) -> dict[str, int]:
    """Drop zero amounts and count the pod itself (``pods: 1``)."""
    out: dict[str, int] = {}
    for res, amount in requests.items():
        check_name("resource name", res, ":=, ")
        if isinstance(amount, int) and amount > MAX_AMOUNT:
            raise ValueError(f"request {res}: {over_limit(format_quantity(amount, res), res)}")
        if check_count(f"request {res}", amount) > 0:
            out[res] = amount
    out["pods"] = 1
    return out


def normalize_ports(ports: Iterable[HostPort]) -> tuple[HostPort, ...]:
    out: dict[HostPort, None] = {}
    for ip, protocol, port in ports:
        check_count("host port", port)
        if port <= 0:
            continue
        if port > 65535:
            raise ValueError(f"host port out of range: {port}")
        protocol = protocol or DEFAULT_PROTOCOL
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}")
        ip = ip or DEFAULT_HOST_IP
        check_name("host ip", ip, "|, ")
        out[HostPort(ip, protocol, port)] = None
    return tuple(out)


def encode_ports(ports: Iterable[HostPort]) -> str:
    return ",".join(f"{proto}|{port}|{ip}" for ip, proto, port in ports)


def decode_ports(text: str) -> tuple[HostPort, ...]:
    out = []
    for item in text.split(","):
        if item:
            proto, port, ip = item.split("|", 2)
            out.append(HostPort(ip, proto, int(port)))
    return tuple(out)


def check_domain(name: str) -> str:
    key, sep, _ = name.partition("=")
    if not sep or not key:
        raise ValueError(f"a topology domain is '<topologyKey>=<value>', got {name!r}")
    return name


def encode_requests(requests: Mapping[str, int]) -> str:
    return ",".join(f"{res}={amount}" for res, amount in requests.items())


def decode_requests(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in text.split(",") if text else ():
        res, amount = item.rsplit("=", 1)
        out[res] = int(amount)
    return out


def encode_anti_affinity_keys(keys: Iterable[str]) -> str:
    checked = [check_name("anti-affinity topology key", k, ",= ") for k in keys]
    return ",".join(dict.fromkeys(checked))


def encode_record(
    *,
    node: str,
    uid: str,
    requests: Mapping[str, int],
    ports: Iterable[HostPort],
    token: str,
    anti_affinity_keys: Iterable[str],
) -> str:
    """The ledger's record of a pod, ``node token req ports ak uid`` (what
    lib/ledger_record.lua's led_encode writes; the uid last, so it may hold anything)."""
    check_name("node name", node, ": ")
    check_name("token", token, " ")
    return " ".join(
        (
            node,
            token,
            encode_requests(requests),
            encode_ports(ports),
            encode_anti_affinity_keys(anti_affinity_keys),
            uid,
        )
    )


def decode_record(pod_key: str, raw: str | bytes, deadline: float | None) -> PodRecord:
    text = as_text(raw)
    if text.startswith("{"):  # JSON, written before this layout (an in-place upgrade)
        legacy = json.loads(text)
        text = " ".join(
            (
                legacy["node"],
                str(legacy.get("token", "")),
                encode_requests(legacy.get("req") or {}),
                str(legacy.get("ports", "")),
                str(legacy.get("ak", "")),
                str(legacy.get("uid", "")),
            )
        )
    parts = text.split(" ", 5)
    if len(parts) != 6:
        raise ValueError(f"not a ledger record for {pod_key}: {text!r}")
    node, token, req, ports, ak, uid = parts
    return PodRecord(
        pod_key=pod_key,
        node=node,
        uid=uid,
        state="bound" if deadline is None else "assumed",
        requests=decode_requests(req),
        ports=decode_ports(ports),
        token=token,
        deadline_ms=None if deadline is None else int(deadline),
        anti_affinity_keys=tuple(k for k in ak.split(",") if k),
    )
