"""From loaded manifests to the dicts the store writes, with the API server's admission.

``prepare`` runs every check that needs the store's current state, before anything is
written (so bad input still writes nothing):

- priority admission of every Pod (model/admission.py) against the PriorityClasses in
  the store and in the same input;
- at most one PriorityClass marked globalDefault (kube: "PriorityClass ... is already
  marked as default. Only one default can exist");
- every update of an object that exists is one the store will take: the same
  :func:`~distsched.store.redis_store.merge_update` the store runs refuses a changed uid
  and, for pods, any change kube's ValidatePodUpdate refuses (model/pod_update.py).
  Priority admission runs on create only, as kube's does: an update keeps the priority,
  class and preemption policy the pod was admitted with (``admit_pod_update``). A pod
  manifest that states no status keeps the stored one (kube's pod update never touches
  status; here a stated one still replaces it: in standalone mode apply is also how a
  pod's phase is set).

The store checks updates again when it writes, against the object it read then: an object
changed by someone else in between is refused at that point (after the objects before it
were written; the caller reports those).

Workload objects become pods through the controller role (distsched/controllers/), not
here; this module only writes what it was given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from distsched.model.admission import PriorityClasses, admit_pod, admit_pod_update
from distsched.model.errors import ManifestError
from distsched.model.manifest import KubeObject, Location
from distsched.model.objects import Pod, PodStatus
from distsched.model.workloads import PriorityClass
from distsched.store import BindConflict, InvalidUpdate, Store, StoreError, UidMismatch
from distsched.store.codec import Obj, with_rv
from distsched.store.redis_store import merge_update

Stored = Mapping[tuple[str, str], Obj]
"""The stored objects an apply updates: (kind, key) -> object."""


def stored_priority_classes(store: Store) -> list[Obj]:
    return store.list("PriorityClass")[0]


def stored_objects(store: Store, objects: Sequence[KubeObject]) -> dict[tuple[str, str], Obj]:
    """The stored versions of ``objects`` that exist, read with one MULTI per kind."""
    by_kind: dict[str, list[str]] = {}
    for obj in objects:
        by_kind.setdefault(obj.kind, []).append(obj.key)
    found: dict[tuple[str, str], Obj] = {}
    for kind, keys in by_kind.items():
        for key, current in zip(keys, store.get_many(kind, keys), strict=True):
            if current is not None:
                found[(kind, key)] = current
    return found


def prepare(
    objects: Sequence[KubeObject],
    locations: Sequence[Location],
    existing_classes: Sequence[Obj],
    stored: Stored | None = None,
) -> list[dict[str, Any]]:
    """The dicts to apply, in order; ManifestError naming the object's file, document
    and field when admission refuses one, or when the update of a ``stored`` object
    changes what may not change."""
    given = {
        o.metadata.name: (o, loc)
        for o, loc in zip(objects, locations, strict=True)
        if isinstance(o, PriorityClass)
    }
    classes = [c for c in existing_classes if c["metadata"]["name"] not in given]
    defaults = [c["metadata"]["name"] for c in classes if c.get("globalDefault")]
    for name, (pc, loc) in given.items():
        if pc.global_default:
            if defaults:
                raise located(
                    ManifestError(
                        "",
                        None,
                        "globalDefault",
                        f"PriorityClass {defaults[0]!r} is already marked as default. "
                        "Only one default can exist",
                    ),
                    loc,
                    pc.kind,
                    name,
                )
            defaults.append(name)
    resolver = PriorityClasses.from_dicts([*classes, *(pc.to_dict() for pc, _ in given.values())])
    out: list[dict[str, Any]] = []
    for obj, loc in zip(objects, locations, strict=True):
        data = obj.to_dict()
        current = (stored or {}).get((obj.kind, obj.key))
        try:
            if isinstance(obj, Pod):
                if current is None:
                    data = admit_pod(data, resolver)
                else:
                    data = admit_pod_update(data, current)
                    if obj.status == PodStatus():
                        # No status stated (a manifest reads back with the default one):
                        # the stored one stays, conditions and nomination included.
                        del data["status"]
            if current is not None:
                merge_update(current, with_rv(data, ""), obj.kind, obj.key)
        except ManifestError as exc:
            raise located(exc, loc, obj.kind, obj.key) from None
        except StoreError as exc:
            refused = update_error(exc)
            if refused is None:
                raise
            raise located(refused, loc, obj.kind, obj.key) from None
        out.append(data)
    return out


def update_error(exc: StoreError) -> ManifestError | None:
    """The bad-input error (field and reason) of an update the store refuses; None for
    other store errors."""
    if isinstance(exc, InvalidUpdate):
        return ManifestError("", None, exc.field, exc.reason)
    if isinstance(exc, UidMismatch):
        return ManifestError(
            "",
            None,
            "metadata.uid",
            f"field is immutable: the stored object's uid is {exc.current_uid!r}",
        )
    if isinstance(exc, BindConflict):
        return ManifestError(
            "", None, "spec.nodeName", f"field is immutable: the pod is bound to {exc.node!r}"
        )
    return None


def located(exc: ManifestError, loc: Location, kind: str, name: str) -> ManifestError:
    """``exc`` at the object's file, document and item."""
    source, document, item = loc
    return ManifestError(source, document, exc.field, exc.reason, item=item, kind=kind, name=name)
