"""Fetch and parse Prometheus text exposition (just what the tests need)."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

import redis
from prometheus_client import generate_latest

from distsched import metrics
from distsched.keys import Keys

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass
class Exposition:
    types: dict[str, str] = field(default_factory=dict)  # family name -> counter|gauge|...
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def values(self, name: str, **labels: str) -> list[float]:
        return [
            value
            for sample, have, value in self.samples
            if sample == name and all(have.get(k) == v for k, v in labels.items())
        ]

    def value(self, name: str, **labels: str) -> float:
        found = self.values(name, **labels)
        assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
        return found[0]

    def total(self, name: str, **labels: str) -> float:
        return sum(self.values(name, **labels))


def parse(text: str) -> Exposition:
    exposition = Exposition()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            exposition.types[name] = kind
        elif line and not line.startswith("#"):
            match = SAMPLE.match(line)
            assert match, f"unparsable sample line: {line!r}"
            name, labels, value = match.groups()
            parsed = dict(LABEL.findall(labels or ""))
            exposition.samples.append((name, parsed, float(value)))
    return exposition


def scrape(host: str, port: int, *, timeout_s: float = 15.0) -> Exposition:
    """GET /metrics, waiting for the process to start serving."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=2) as response:
                return parse(response.read().decode())
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def exposed_families(client: redis.Redis) -> dict[str, str]:
    """Family name -> type of everything a distsched process exposes: the registry's
    metrics and the gauges the queue collector reads from Redis (``client``)."""
    text = generate_latest(metrics.REGISTRY).decode()
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    for family in metrics.QueueCollector(client, Keys("test")).collect():
        # the exposition names a counter's series (and its TYPE line) with "_total"
        name = family.name + "_total" if family.type == "counter" else family.name
        types[name] = family.type
    return types
