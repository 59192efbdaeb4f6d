"""The Kubernetes mode of a role: where the API server is, and the writer it uses there.

Every role that writes to the cluster (worker, binder) or mirrors it (kube-bridge) takes
``--kubeconfig PATH`` (or ``in-cluster``: the pod's service account), also read from
``$DISTSCHED_KUBECONFIG``; without one a role runs standalone (the Redis store is the
cluster). A :class:`KubeMode` is plain data, so it crosses into the binder pool's child
processes; each process makes its own client (:meth:`KubeMode.writer`).
"""

from __future__ import annotations

from dataclasses import dataclass

from distsched.kube.client import KubeClient
from distsched.kube.cluster_writer import KubeClusterWriter
from distsched.kube.config import KubeConfig, in_cluster, load
from distsched.kube.writer import KubeWriter
from distsched.store import Store

ENV = "DISTSCHED_KUBECONFIG"
IN_CLUSTER = "in-cluster"


@dataclass(frozen=True, slots=True)
class KubeMode:
    kubeconfig: str
    context: str | None = None

    def config(self) -> KubeConfig:
        """The API server's configuration (:class:`KubeConfigError` when unusable)."""
        if self.kubeconfig == IN_CLUSTER:
            return in_cluster()
        return load(self.kubeconfig, context=self.context)

    def client(self) -> KubeClient:
        return KubeClient(self.config())

    def writer(self, store: Store, *, scheduler_name: str) -> KubeClusterWriter:
        """The cluster writer of a role in this mode (a client of its own)."""
        return KubeClusterWriter(KubeWriter(self.client(), scheduler_name=scheduler_name), store)


def kube_mode(kubeconfig: str | None, context: str | None = None) -> KubeMode | None:
    return KubeMode(kubeconfig, context) if kubeconfig else None
