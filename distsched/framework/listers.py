"""What plugins read of the cluster besides the snapshot: kube's SharedInformerFactory
listers, in one object the Handle carries.

- ``nominator``: pods that preemption nominated to a node and that are not bound yet
  (kube's PodNominator, which the framework's Handle embeds);
- ``budgets``: PodDisruptionBudgets, for DefaultPreemption (kube's PDB lister);
- ``namespaces``: Namespace objects' labels, for namespaceSelector (kube's namespace
  lister, which InterPodAffinity and the queue's AssignedPodAdd rule read);
- ``volumes``: PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes,
  CSIDrivers and CSIStorageCapacities, typed (kube's listers of them, which the volume
  plugins read).

Nothing here is module state: each scheduling worker's informer feeds the Listers its
profiles' Handle carries (workers/local_cache.py), so in-process workers each see their
own; the binder, replay and the bench run plugins with a Handle whose Listers nobody
feeds (their plugins read none). In the Kubernetes mode the bridge mirrors the cluster's
objects into the store, so the same informer feeds them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from distsched.clock import SYSTEM_CLOCK, Clock
from distsched.framework.nominator import PodNominator
from distsched.model.labels import NAMESPACE_NAME_LABEL
from distsched.model.pdbs import Budget, budget_from_dict, pdb_key
from distsched.model.volumes import (
    DECODERS,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)

log = logging.getLogger(__name__)


class NamespaceLabels:
    """Namespace objects' labels by name. A namespace without an object has only
    ``kubernetes.io/metadata.name`` (which the API server puts on every namespace)."""

    def __init__(self) -> None:
        self._labels: dict[str, dict[str, str]] = {}

    def set(self, namespace: str, labels: Mapping[str, str] | None) -> None:
        """Record a Namespace object's labels (None: the object was deleted)."""
        if labels is None:
            self._labels.pop(namespace, None)
        else:
            self._labels[namespace] = {**labels, NAMESPACE_NAME_LABEL: namespace}

    def of(self, namespace: str) -> Mapping[str, str]:
        """The namespace's labels (what ``AffinityTerm.matches`` asks for)."""
        return self._labels.get(namespace) or {NAMESPACE_NAME_LABEL: namespace}


class DisruptionBudgets:
    """The known budgets, by key; thread-safe (an informer thread may write)."""

    def __init__(self, budgets: list[Budget] | None = None) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, Budget] = {b.key: b for b in budgets or ()}

    def set(self, obj: Mapping[str, Any]) -> None:
        budget = budget_from_dict(obj)
        key = pdb_key(obj)
        with self._lock:
            if budget is None:
                self._by_key.pop(key, None)
            else:
                self._by_key[key] = budget

    def delete(self, obj: Mapping[str, Any]) -> None:
        with self._lock:
            self._by_key.pop(pdb_key(obj), None)

    def all(self) -> list[Budget]:
        with self._lock:
            return list(self._by_key.values())


class VolumeObjects:
    """The storage objects the volume plugins read, typed, by key (claims by
    ``namespace/name``, the cluster-scoped kinds by name). An object that does not decode
    (written past ``apply``'s validation) counts as absent, logged. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_kind: dict[str, dict[str, Any]] = {kind: {} for kind in DECODERS}
        self._versions: dict[str, int] = dict.fromkeys(DECODERS, 0)

    def versions(self, *kinds: str) -> tuple[int, ...]:
        """The change counters of ``kinds``, each bumped on every set or delete of one of
        its objects (for caches of what the objects decide)."""
        return tuple(self._versions[kind] for kind in kinds)

    def set(self, kind: str, obj: Mapping[str, Any]) -> None:
        try:
            typed = DECODERS[kind](obj)
        except ValueError as exc:
            log.warning("%s %s is unusable: %s", kind, _key_of(obj), exc)
            self.delete(kind, obj)
            return
        with self._lock:
            self._by_kind[kind][typed.key] = typed
            self._versions[kind] += 1

    def delete(self, kind: str, obj: Mapping[str, Any]) -> None:
        with self._lock:
            self._by_kind[kind].pop(_key_of(obj), None)
            self._versions[kind] += 1

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        found: PersistentVolumeClaim | None = self._by_kind["PersistentVolumeClaim"].get(
            f"{namespace}/{name}"
        )
        return found

    def volume(self, name: str) -> PersistentVolume | None:
        found: PersistentVolume | None = self._by_kind["PersistentVolume"].get(name)
        return found

    def storage_class(self, name: str) -> StorageClass | None:
        found: StorageClass | None = self._by_kind["StorageClass"].get(name)
        return found

    def csi_node(self, name: str) -> CSINode | None:
        found: CSINode | None = self._by_kind["CSINode"].get(name)
        return found

    def volumes(self) -> list[PersistentVolume]:
        with self._lock:
            return list(self._by_kind["PersistentVolume"].values())

    def csi_driver(self, name: str) -> CSIDriver | None:
        found: CSIDriver | None = self._by_kind["CSIDriver"].get(name)
        return found

    def capacities(self) -> list[CSIStorageCapacity]:
        with self._lock:
            return list(self._by_kind["CSIStorageCapacity"].values())


def _key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace, name = meta.get("namespace"), meta.get("name")
    return f"{namespace}/{name}" if namespace else str(name)


def _nothing_deleting(_keys: Sequence[str]) -> bool:
    return False


def _nothing_releasing(_node: str) -> bool:
    return False


@dataclass(slots=True)
class Listers:
    nominator: PodNominator = field(default_factory=PodNominator)
    budgets: DisruptionBudgets = field(default_factory=DisruptionBudgets)
    namespaces: NamespaceLabels = field(default_factory=NamespaceLabels)
    volumes: VolumeObjects = field(default_factory=VolumeObjects)
    # Whether a deletion the worker's writer sent for one of these pods ("ns/name") is not
    # answered yet (preemption's victims, through an API server): DefaultPreemption's
    # eligibility check counts them as terminating. The worker sets it to its writer's.
    deleting: Callable[[Sequence[str]], bool] = _nothing_deleting
    # Whether the shared ledger still counts, on this node, a pod the store has deleted
    # (its release by the handlers is still to come): the room is about to be free, and
    # DefaultPreemption's eligibility check waits for it as for a terminating victim. The
    # worker sets it to its ledger's; alone (no ledger) nothing is ever pending.
    releasing: Callable[[str], bool] = _nothing_releasing
    # The worker's clock (the worker sets it to its own): DefaultPreemption's eligibility
    # check ages a victim's DisruptionTarget condition with it.
    clock: Clock = SYSTEM_CLOCK
