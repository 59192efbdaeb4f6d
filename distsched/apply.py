"""From loaded manifests to the dicts the store writes, with the API server's admission.

``prepare`` runs every check that needs the store's current state, before anything is
written (so bad input still writes nothing):

- priority admission of every Pod (model/admission.py) against the PriorityClasses in
  the store and in the same input;
- at most one PriorityClass marked globalDefault (kube: "PriorityClass ... is already
  marked as default. Only one default can exist").

Workload objects become pods through the controller role (distsched/controllers/), not
here; this module only writes what it was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distsched.model.admission import PriorityClasses, admit_pod
from distsched.model.errors import ManifestError
from distsched.model.manifest import KubeObject, Location
from distsched.model.workloads import PriorityClass
from distsched.store import Store
from distsched.store.codec import Obj


def stored_priority_classes(store: Store) -> list[Obj]:
    return store.list("PriorityClass")[0]


def prepare(
    objects: Sequence[KubeObject],
    locations: Sequence[Location],
    existing_classes: Sequence[Obj],
) -> list[dict[str, Any]]:
    """The dicts to apply, in order; ManifestError naming the object's file, document
    and field when admission refuses one."""
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
                raise _at(
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
        if obj.kind == "Pod":
            try:
                data = admit_pod(data, resolver)
            except ManifestError as exc:
                raise _at(exc, loc, "Pod", obj.key) from None
        out.append(data)
    return out


def _at(exc: ManifestError, loc: Location, kind: str, name: str) -> ManifestError:
    source, document, item = loc
    return ManifestError(source, document, exc.field, exc.reason, item=item, kind=kind, name=name)
