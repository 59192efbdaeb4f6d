"""Objects distsched keeps without acting on them: Services, ConfigMaps, Secrets, RBAC,
StorageClasses, PersistentVolumeClaims, NetworkPolicies, CustomResourceDefinitions,
custom resources, ... (every kind outside ``kinds.ALL_KINDS``).

They are validated as the API server validates every object (the header, the metadata:
name, namespace, labels, annotations) and stored as given, in the store of their
:func:`~distsched.model.kinds.store_kind`, so that ``get``, ``delete`` and a later feature
(volume binding reads PersistentVolumeClaims and StorageClasses) find them as kube
returns them. Name rules per kind, as kube's: RBAC objects take any path segment
(``system:metrics-server``), a Service a DNS-1035 label, a CustomResourceDefinition
``<plural>.<group>``, everything else a DNS-1123 subdomain. Nothing of the spec is read.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from distsched.model import names
from distsched.model.decode_common import decode_meta
from distsched.model.fields import Fields, expect_object, quote
from distsched.model.objects import DEFAULT_NAMESPACE, ObjectMeta

CRD_KIND = "CustomResourceDefinition"
CRD_SCOPES = ("Namespaced", "Cluster")
RBAC_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})

NAME_CHECKS: Mapping[str, Callable[[str], str | None]] = {
    **dict.fromkeys(RBAC_KINDS, names.path_segment),
    "Service": names.dns1035_label,
    "Namespace": names.dns1123_label,
}
"""Kinds whose names follow another rule than a DNS-1123 subdomain (kube's
ValidateRBACName, ValidateServiceName)."""


@dataclass(frozen=True, slots=True)
class StoredObject:
    """An object of a kind distsched does not act on, as given (``raw``)."""

    kind: str  # the store kind: "Service", "Certificate.cert-manager.io"
    metadata: ObjectMeta  # namespace "" when cluster-scoped
    raw: dict[str, Any] = field(compare=False, repr=False, default_factory=dict)

    @property
    def key(self) -> str:
        meta = self.metadata
        return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name

    def to_dict(self) -> dict[str, Any]:
        return self.raw


def stored_from_dict(data: Any, stored_kind: str, *, cluster_scoped: bool) -> StoredObject:
    """Validate the metadata of an object of ``stored_kind`` (its header already checked)
    and keep it as given, its namespace filled in (namespaced) or dropped (as the API
    server does for a cluster-scoped kind)."""
    root = expect_object(data, "")
    meta_fields = root.get_obj("metadata", required=True)
    assert meta_fields is not None
    check = NAME_CHECKS.get(stored_kind, names.dns1123_subdomain)
    meta = decode_meta(meta_fields, namespaced=not cluster_scoped, name_check=check)
    if stored_kind == CRD_KIND:
        _check_crd(root, meta.name)
    raw = copy.deepcopy(data)
    metadata = raw["metadata"]
    if cluster_scoped:
        metadata.pop("namespace", None)
    else:
        metadata["namespace"] = meta.namespace
    return StoredObject(stored_kind, meta, raw)


def _check_crd(root: Fields, name: str) -> None:
    """What kube checks of a CustomResourceDefinition that distsched reads: its group,
    kind and scope, and a name that is ``<plural>.<group>``."""
    spec = root.get_obj("spec", required=True)
    assert spec is not None
    group = spec.get_str("group", required=True)
    spec.check_str("group", group, names.dns1123_subdomain)
    crd_names = spec.get_obj("names", required=True)
    assert crd_names is not None
    crd_names.get_str("kind", required=True)
    plural = crd_names.get_str("plural", required=True)
    spec.check_one_of("scope", spec.get_str("scope", required=True), CRD_SCOPES)
    if name != f"{plural}.{group}":
        root.fail(
            "metadata.name",
            f'invalid value {quote(name)}: must be spec.names.plural+"."+spec.group '
            f"({quote(plural + '.' + group)})",
        )


def crd_scopes(objects: Iterable[Any]) -> dict[str, bool]:
    """Store kind (``Kind.group``) -> cluster-scoped, of every CustomResourceDefinition
    among ``objects`` (raw dicts; anything else, or a CRD missing those fields, is
    passed over: its own validation reports it)."""
    out: dict[str, bool] = {}
    for obj in objects:
        if not isinstance(obj, dict) or obj.get("kind") != CRD_KIND:
            continue
        spec = obj.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("names"), dict):
            continue
        group, kind = spec.get("group"), spec["names"].get("kind")
        if isinstance(group, str) and isinstance(kind, str) and group and kind:
            out[f"{kind}.{group}"] = spec.get("scope") == "Cluster"
    return out


def describe(data: Any, *, cluster_scoped: bool) -> str:
    """Best-effort ``namespace/name`` (or ``name``) of a raw object, for error locations."""
    meta = data.get("metadata") if isinstance(data, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return ""
    if cluster_scoped:
        return str(meta["name"])
    namespace = meta.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        namespace = DEFAULT_NAMESPACE
    return f"{namespace}/{meta['name']}"


def crd_names(obj: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """(store kind, the names kubectl takes for its resources: plural, singular, short
    names, ``plural.group``) of a stored CustomResourceDefinition; ("", ()) if it lacks
    them."""
    spec = obj.get("spec") or {}
    crd = spec.get("names") or {}
    group, kind = spec.get("group"), crd.get("kind")
    if not isinstance(group, str) or not isinstance(kind, str) or not group or not kind:
        return "", ()
    plural = str(crd.get("plural") or "")
    words = [plural, str(crd.get("singular") or ""), kind.lower(), f"{plural}.{group}"]
    words += [str(s) for s in crd.get("shortNames") or () if isinstance(s, str)]
    return f"{kind}.{group}", tuple(w.lower() for w in words if w)
