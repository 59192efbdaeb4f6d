"""Names of the objects the controllers make, in the shapes kube's controllers give them.

- ReplicaSet of a Deployment: ``<deployment>-<pod-template-hash>``; the hash is kube's
  recipe (32-bit FNV-1a of the template, its decimal digits mapped through
  ``rand.SafeEncodeString``'s alphabet), over the template's canonical JSON rather than
  Go's spew dump, so the value differs from a real cluster's for the same template.
- Pods of ReplicaSets, DaemonSets and Jobs: ``<owner>-<5 characters>``, like the API
  server's generateName suffix (same alphabet), but derived from the owner's uid and a
  slot (a counter, a node name, a completion index) instead of drawn at random: two
  controller instances that decide the same thing make the same name, and the store's
  create refuses the second (``AlreadyExists``), so a duplicate pod cannot appear.
- StatefulSet pods: ``<statefulset>-<ordinal>``.
"""

from __future__ import annotations

import json
from typing import Any

ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand
SUFFIX_LENGTH = 5
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def fnv32a(data: bytes) -> int:
    h = _FNV_OFFSET
    for byte in data:
        h ^= byte
        h = (h * _FNV_PRIME) & 0xFFFFFFFF
    return h


def safe_encode(text: str) -> str:
    """rand.SafeEncodeString: each byte mapped onto the vowel-free alphabet."""
    return "".join(ALPHANUMS[ord(ch) % len(ALPHANUMS)] for ch in text)


def template_hash(template: Any, collision_count: int = 0) -> str:
    """The pod-template-hash label value of a pod template."""
    canonical = json.dumps(template, sort_keys=True, separators=(",", ":"))
    if collision_count:
        canonical += f"#{collision_count}"
    return safe_encode(str(fnv32a(canonical.encode())))


def suffix(owner_uid: str, slot: str) -> str:
    """Five characters of ALPHANUMS, a function of the owner and the slot only."""
    value = fnv32a(f"{owner_uid}/{slot}".encode())
    out = []
    for _ in range(SUFFIX_LENGTH):
        value, digit = divmod(value, len(ALPHANUMS))
        out.append(ALPHANUMS[digit])
    return "".join(out)


def generated_name(owner_name: str, owner_uid: str, slot: str) -> str:
    """``<owner>-<suffix>``; the owner part is cut so the name stays <= 63 characters, as
    kube's SimpleNameGenerator cuts the base."""
    base = owner_name[: 63 - SUFFIX_LENGTH - 1]
    return f"{base}-{suffix(owner_uid, slot)}"
