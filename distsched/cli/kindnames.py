"""kubectl's names of kinds -> store kinds: ``pods``, ``svc``, ``clusterroles``,
``ingresses.networking.k8s.io``, and for custom resources the names their stored
CustomResourceDefinition gives (``certificates``, ``cert``, ``certificates.cert-manager.io``),
else the lowercase kind and its plural, with or without the group, of the custom kinds
the store holds (``Store.custom_kinds``), or the store kind itself
(``Certificate.cert-manager.io``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from distsched.model.generic import CRD_KIND, crd_names
from distsched.model.kinds import (
    ALL_KINDS,
    CLUSTER_SCOPED,
    SERVED,
    SHORT_NAMES,
    group_of,
    object_kind,
    plural,
    store_kind_syntax,
)

_ALIASES: dict[str, tuple[str, ...]] = {
    "Pod": ("pod", "pods", "po"),
    "Node": ("node", "nodes", "no"),
    "Namespace": ("namespace", "namespaces", "ns"),
    "PriorityClass": ("priorityclass", "priorityclasses", "pc"),
    "PodDisruptionBudget": ("poddisruptionbudget", "poddisruptionbudgets", "pdb"),
    "Deployment": ("deployment", "deployments", "deploy"),
    "ReplicaSet": ("replicaset", "replicasets", "rs"),
    "StatefulSet": ("statefulset", "statefulsets", "sts"),
    "DaemonSet": ("daemonset", "daemonsets", "ds"),
    "Job": ("job", "jobs"),
    "PodGroup": ("podgroup", "podgroups", "pg", "pgs"),
}
assert set(_ALIASES) == set(ALL_KINDS)

if TYPE_CHECKING:
    from distsched.store import Store


def _builtin_names() -> dict[str, str]:
    names = {alias: kind for kind, aliases in _ALIASES.items() for alias in aliases}
    for version, kinds in SERVED.items():
        group = group_of(version)
        for kind in kinds:
            words = [kind.lower(), plural(kind), *SHORT_NAMES.get(kind, ())]
            if group:
                words += [f"{plural(kind)}.{group}", f"{kind.lower()}.{group}"]
            for word in words:
                names.setdefault(word, kind)
    return names


KIND_BY_NAME = _builtin_names()
"""Every built-in kind by each name kubectl takes for it."""


class KindNames:
    """Resolves the kind names a user types; ``store()`` is called, and its
    CustomResourceDefinitions and custom kinds read, once, when a name is not a
    built-in one (so that those need no Redis)."""

    def __init__(self, store: Callable[[], Store]) -> None:
        self._store: Callable[[], Store] | None = store
        self._custom: dict[str, str] = {}
        self._cluster: dict[str, bool] = {}

    def _load(self) -> None:
        if self._store is None:
            return
        store, self._store = self._store(), None
        for crd in store.list(CRD_KIND)[0]:
            kind, words = crd_names(crd)
            if kind:
                self._cluster[kind] = (crd.get("spec") or {}).get("scope") == "Cluster"
                for word in words:
                    self._custom.setdefault(word, kind)
        for kind in store.custom_kinds():  # custom resources stored without their CRD
            name, group = object_kind(kind), kind.partition(".")[2]
            for word in (plural(name), name.lower()):
                self._custom.setdefault(word, kind)
                self._custom.setdefault(f"{word}.{group}", kind)

    def resolve(self, word: str) -> str:
        """The store kind of ``word``; ValueError when nothing names it."""
        kind = KIND_BY_NAME.get(word.strip().lower())
        if kind is not None:
            return kind
        self._load()
        kind = self._custom.get(word.strip().lower())
        if kind is not None:
            return kind
        if "." in word and store_kind_syntax(word.strip()) is None:
            return word.strip()  # a custom store kind as `get` prints it: Kind.group
        known = ", ".join(a[1] for a in _ALIASES.values())
        raise ValueError(
            f"unknown kind {word!r}: one of {known}, a built-in kind (services, configmaps, "
            "clusterroles, ...), a custom resource whose CustomResourceDefinition is "
            "stored, or Kind.group"
        )

    def parse(self, text: str) -> list[str]:
        """``pods,nodes`` -> ["Pod", "Node"]; ValueError naming an unknown kind."""
        kinds: list[str] = []
        for part in text.split(","):
            kind = self.resolve(part)
            if kind not in kinds:
                kinds.append(kind)
        return kinds

    def cluster_scoped(self, kind: str) -> bool | None:
        """Whether objects of store kind ``kind`` are cluster-scoped; None for a custom
        kind whose CustomResourceDefinition is not stored."""
        if "." not in kind:
            return kind in CLUSTER_SCOPED
        self._load()
        return self._cluster.get(kind)


def crd_reader(store: Store) -> Callable[[], Iterable[Any]]:
    """The store's CustomResourceDefinitions, read when called."""
    return lambda: store.list(CRD_KIND)[0]
