"""Builders for DefaultPreemption's tests: nodes, pods with a priority, victims' names."""

from __future__ import annotations

from dataclasses import replace

from tests.framework.builders import make_node, make_pod
from tests.support.objects import HOSTNAME as HOST


def node(name, cpu=4000, **labels):
    return make_node(name, cpu=cpu, labels={HOST: name, **labels})


def pod(name, cpu=1000, priority=None, node_name="", created="", labels=None, **kwargs):
    p = make_pod(
        name, requests={"cpu": cpu}, priority=priority, node_name=node_name, labels=labels, **kwargs
    )
    if created:
        p = replace(p, metadata=replace(p.metadata, creation_timestamp=created))
    return p


def names(pods):
    return [p.metadata.name for p in pods]
