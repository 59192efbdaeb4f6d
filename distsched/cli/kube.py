"""Pointing distsched at a real Kubernetes cluster: ``kube-bridge``, and the
``--kubeconfig`` option every role that writes to the cluster takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from distsched.cli.common import bad_input, make_context, redis_options


def kubeconfig_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--kubeconfig and --context (kubectl's names). A role given one schedules a real
    cluster (the API server is the truth); ``in-cluster`` means the pod's service account.
    Also read from $DISTSCHED_KUBECONFIG."""
    fn = click.option("--context", "kube_context", default=None, help="kubeconfig context.")(fn)
    return click.option(
        "--kubeconfig",
        envvar="DISTSCHED_KUBECONFIG",
        default=None,
        help="Schedule the cluster of this kubeconfig file ('in-cluster': the pod's "
        "service account) [env: DISTSCHED_KUBECONFIG].",
    )(fn)


def checked_mode(kubeconfig: str | None, context: str | None) -> Any:
    """The role's :class:`~distsched.kube.mode.KubeMode` (None: standalone), its
    configuration checked now: a bad kubeconfig is exit 2, before the role starts."""
    if not kubeconfig:
        return None
    from distsched.kube.config import KubeConfigError
    from distsched.kube.mode import KubeMode

    mode = KubeMode(kubeconfig, context)
    try:
        mode.config()
    except KubeConfigError as exc:
        bad_input(str(exc))
    return mode


def kube_client(kubeconfig: str | None, context: str | None) -> Any:
    """A :class:`~distsched.kube.client.KubeClient` (without a kubeconfig: $KUBECONFIG,
    in-cluster, ~/.kube/config); a bad kubeconfig is exit 2."""
    from distsched.kube.client import KubeClient
    from distsched.kube.config import KubeConfigError, load
    from distsched.kube.mode import KubeMode

    try:
        if kubeconfig:
            return KubeMode(kubeconfig, context).client()
        return KubeClient(load(None, context=context))
    except KubeConfigError as exc:
        bad_input(str(exc))


@click.command("kube-bridge")
@kubeconfig_options
@click.option("--config", type=click.Path(dir_okay=False), help="KubeSchedulerConfiguration YAML.")
@click.option(
    "--lease-ms",
    type=click.IntRange(min=100),
    default=15_000,
    show_default=True,
    help="Leader lease: with several bridges one mirrors, another takes over this long "
    "after it stops.",
)
@click.option(
    "--write-linger-ms",
    type=click.IntRange(min=0),
    default=40,
    show_default=True,
    help="How long the API server's changes gather before one write into the store.",
)
@click.option("--metrics-port", type=int, default=0, help="Serve /metrics on this port (0 = off).")
@click.option(
    "--metrics-addr", default="127.0.0.1", show_default=True, help="Metrics bind address."
)
@redis_options
def kube_bridge(
    kubeconfig: str | None,
    kube_context: str | None,
    config: str | None,
    lease_ms: int,
    write_linger_ms: int,
    metrics_port: int,
    metrics_addr: str,
    **kwargs: Any,
) -> None:
    """Mirror a real API server into the store: its nodes, pods and what plugins read;
    the pods of this deployment's profiles get scheduled."""
    from distsched import metrics
    from distsched.bridge.main import profile_names, run_bridge
    from distsched.framework.profile import ConfigError

    ctx = make_context(kwargs)
    try:
        profiles = profile_names(config)
    except ConfigError as exc:
        bad_input(str(exc))
    kube = kube_client(kubeconfig, kube_context)
    if metrics_port:
        metrics.serve(metrics_port, addr=metrics_addr)
    try:
        run_bridge(
            ctx.require_url(),
            ctx.keys,
            kube,
            profiles=profiles,
            lease_ms=lease_ms,
            write_linger_s=write_linger_ms / 1000,
        )
    finally:
        kube.close()
