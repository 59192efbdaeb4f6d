"""Applying manifests the way `distsched apply` does, for in-process controller tests,
and the manifests they apply."""

from __future__ import annotations

from pathlib import Path

from distsched.apply import prepare, stored_priority_classes
from distsched.model import load_manifests, load_path
from distsched.model.manifest import Location
from distsched.store import Store

MANIFESTS = Path(__file__).parent / "manifests"


def deployment(name: str, replicas: int, *, image: str = "nginx:1.25", extra: str = "") -> str:
    """A Deployment of ``replicas`` pods labelled app=NAME, as YAML (``extra``: more spec)."""
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
{extra}      containers:
      - name: web
        image: {image}
        resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}
"""


def apply_path(store: Store, path: Path | str) -> list[str]:
    locations: list[Location] = []
    objects = load_path(path, locations=locations)
    return list(store.apply_many(prepare(objects, locations, stored_priority_classes(store))))


def apply_text(store: Store, text: str, source: str = "t.yaml") -> list[str]:
    objects = load_manifests(source, text)
    locations: list[Location] = [(source, i + 1, None) for i in range(len(objects))]
    return list(store.apply_many(prepare(objects, locations, stored_priority_classes(store))))


def pods_of(store: Store, prefix: str, namespace: str = "default") -> list[dict]:
    return [p for p in store.list("Pod", namespace)[0] if p["metadata"]["name"].startswith(prefix)]
