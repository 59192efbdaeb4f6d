"""Which changes an update may make to a pod, as kube's API server decides
(pkg/apis/core/validation: ValidatePodUpdate).

A pod's spec is fixed at creation but for:

- ``spec.containers[*].image`` and ``spec.initContainers[*].image``;
- ``spec.activeDeadlineSeconds``: set when unset, or lowered (never raised or removed);
- ``spec.tolerations``: added ones; an existing toleration stays, only its
  ``tolerationSeconds`` may change;
- ``spec.schedulingGates``: removed ones (no gate added);
- while the pod is still gated: ``spec.nodeSelector`` additions, and required node affinity
  narrowed (requirements appended to its terms; no term added or removed), preferred node
  affinity freely;
- ``spec.terminationGracePeriodSeconds`` set to 1 when it was negative.

Everything else (resources above all: the ledger holds a bound pod's requests, and an
in-place resize would need kube's ``pods/resize`` path) is refused, naming the first field
that differs. Metadata (labels, annotations, finalizers, ...) and status are not judged
here. Pods are Kubernetes JSON dicts (the store's shape); an absent field, ``None`` and an
empty string, list or map are the same value, as they are once kube decodes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from distsched.model.errors import API_SOURCE, ManifestError
from distsched.model.fields import quote

MAX_INT32 = 2**31 - 1
IMMUTABLE = (
    "field is immutable: a pod update may change only container images, "
    "activeDeadlineSeconds, tolerations (additions) and schedulingGates (removals)"
)
_EMPTY: tuple[Any, ...] = (None, "", [], (), {}, False)


def validate_pod_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> None:
    """ManifestError (source ``<api>``, the field, kube's reason) for the first change of
    ``old`` into ``new`` that a pod update may not make; None when it may."""
    spec, old_spec = _spec(new), _spec(old)
    for name in ("containers", "initContainers"):
        if len(_list(spec, name)) != len(_list(old_spec, name)):
            _fail(f"spec.{name}", "pod updates may not add or remove containers")
    _check_deadline(spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds"))
    _check_tolerations(_list(spec, "tolerations"), _list(old_spec, "tolerations"))
    _check_gates(_list(spec, "schedulingGates"), _list(old_spec, "schedulingGates"))
    munged = _munged(spec, old_spec)
    if _list(old_spec, "schedulingGates"):
        munged = _munge_gated(munged, old_spec)
    path = first_difference(munged, old_spec, "spec")
    if path is not None:
        _fail(path, IMMUTABLE)


def first_difference(new: Any, old: Any, path: str) -> str | None:
    """The path of the first place where ``new`` and ``old`` differ (None if equal):
    map keys in ``old``'s order, then ``new``'s (an absent map reads as an empty one); a
    list of another length is its own path."""
    if _is_empty(new) and _is_empty(old):
        return None
    if isinstance(new, Mapping) and _is_empty(old):
        old = {}  # set where it was not: name the first field set
    elif isinstance(old, Mapping) and _is_empty(new):
        new = {}
    if isinstance(new, Mapping) and isinstance(old, Mapping):
        for key in [*old, *(k for k in new if k not in old)]:
            found = first_difference(new.get(key), old.get(key), f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(new, list | tuple) and isinstance(old, list | tuple):
        if len(new) != len(old):
            return path
        for i, (a, b) in enumerate(zip(new, old, strict=True)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if type(new) is not type(old) and not (_is_number(new) and _is_number(old)):
        return path
    return None if new == old else path


def _check_deadline(new: Any, old: Any) -> None:
    field = "spec.activeDeadlineSeconds"
    if new is None:
        if old is not None:
            _fail(field, "must not update from a positive integer to nil value")
        return
    if not isinstance(new, int) or isinstance(new, bool) or not 0 <= new <= MAX_INT32:
        _fail(field, f"must be between 0 and {MAX_INT32}, inclusive")
    if isinstance(old, int) and old < new:
        _fail(field, "must be less than or equal to previous value")


def _check_tolerations(new: Sequence[Any], old: Sequence[Any]) -> None:
    """kube's validateOnlyAddedTolerations: every existing toleration is still there,
    tolerationSeconds aside."""
    bare = [_without_seconds(t) for t in new]
    for toleration in old:
        if _without_seconds(toleration) not in bare:
            _fail(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            )


def _check_gates(new: Sequence[Any], old: Sequence[Any]) -> None:
    """kube's validateOnlyDeletedSchedulingGates."""
    known = {_gate_name(g) for g in old}
    for i, gate in enumerate(new):
        name = _gate_name(gate)
        if name not in known:
            _fail(
                f"spec.schedulingGates[{i}].name",
                f"only deletion is allowed, but found new scheduling gate {quote(name)}",
            )


def _munged(spec: Mapping[str, Any], old_spec: Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` with what an update may change taken from ``old_spec``."""
    munged = dict(spec)
    for name in ("containers", "initContainers"):
        olds = _list(old_spec, name)
        if olds:
            munged[name] = [
                _with(c, "image", _get(o, "image"))
                for c, o in zip(_list(spec, name), olds, strict=True)
            ]
    for name in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        munged = _with(munged, name, old_spec.get(name))
    grace = old_spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace < 0 and munged.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = grace
    return munged


def _munge_gated(munged: dict[str, Any], old_spec: Mapping[str, Any]) -> dict[str, Any]:
    """A gated pod may still be steered: nodeSelector additions, node affinity narrowed."""
    selector, old_selector = _map(munged, "nodeSelector"), _map(old_spec, "nodeSelector")
    if any(selector.get(k) != v for k, v in old_selector.items()):
        _fail(
            "spec.nodeSelector",
            "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
        )
    munged = _with(munged, "nodeSelector", old_spec.get("nodeSelector"))
    affinity, old_affinity = _map(munged, "affinity"), _map(old_spec, "affinity")
    new_node, old_node = affinity.get("nodeAffinity"), old_affinity.get("nodeAffinity")
    if first_difference(new_node, old_node, "") is not None:
        _check_node_affinity(_as_map(new_node), _as_map(old_node))
        munged = _with(munged, "affinity", _with(affinity, "nodeAffinity", old_node))
    return munged


def _check_node_affinity(new: Mapping[str, Any], old: Mapping[str, Any]) -> None:
    """kube's validateNodeAffinityMutation: preferred terms may change; required terms,
    once there, may only gain requirements."""
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    path = f"spec.affinity.nodeAffinity.{required}.nodeSelectorTerms"
    if old.get(required) is None:
        return
    old_terms = _list(_as_map(old[required]), "nodeSelectorTerms")
    new_terms = _list(_as_map(new.get(required)), "nodeSelectorTerms")
    if old_terms and len(old_terms) != len(new_terms):
        _fail(path, "no additions/deletions to non-empty NodeSelectorTerms list are allowed")
    for i, (term, old_term) in enumerate(zip(new_terms, old_terms, strict=False)):
        if not _only_additions(_as_map(term), _as_map(old_term)):
            _fail(f"{path}[{i}]", "only additions are allowed (no mutations or deletions)")


def _only_additions(term: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    names = ("matchExpressions", "matchFields")
    if not any(_list(old, n) for n in names) and any(_list(term, n) for n in names):
        return False  # an empty term matches nothing: filling it would widen it
    for name in names:
        olds, news = _list(old, name), _list(term, name)
        if olds and first_difference(list(news[: len(olds)]), list(olds), "") is not None:
            return False
    return True


def _spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return _as_map(pod.get("spec"))


def _as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _map(obj: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return _as_map(obj.get(name))


def _list(obj: Mapping[str, Any], name: str) -> Sequence[Any]:
    value = obj.get(name)
    return value if isinstance(value, list | tuple) else ()


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else None


def _with(obj: Any, name: str, value: Any) -> dict[str, Any]:
    """A copy of the map ``obj`` with ``name`` set to ``value`` (left out when empty)."""
    out = {k: v for k, v in _as_map(obj).items() if k != name}
    if not _is_empty(value):
        out[name] = value
    return out


def _without_seconds(toleration: Any) -> dict[str, Any]:
    return {
        k: v
        for k, v in _as_map(toleration).items()
        if k != "tolerationSeconds" and not _is_empty(v)
    }


def _gate_name(gate: Any) -> str:
    return str(_get(gate, "name") or "")


def _is_empty(value: Any) -> bool:
    return any(value is e or (type(value) is type(e) and value == e) for e in _EMPTY)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fail(path: str, reason: str) -> NoReturn:
    raise ManifestError(API_SOURCE, None, path, reason)
