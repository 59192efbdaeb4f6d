"""Pointing distsched at a real Kubernetes cluster: ``kube-bridge``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from distsched.cli.common import bad_input, make_context, redis_options


def kubeconfig_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--kubeconfig and --context (kubectl's names); without them: $KUBECONFIG, the pod's
    service account in a cluster, ~/.kube/config."""
    fn = click.option("--context", "kube_context", default=None, help="kubeconfig context.")(fn)
    return click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False),
        default=None,
        help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config).",
    )(fn)


def kube_client(kubeconfig: str | None, context: str | None) -> Any:
    """A :class:`~distsched.kube.client.KubeClient`; a bad kubeconfig is exit 2."""
    from distsched.kube.client import KubeClient
    from distsched.kube.config import KubeConfigError, load

    try:
        return KubeClient(load(kubeconfig, context=context))
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
@redis_options
def kube_bridge(
    kubeconfig: str | None,
    kube_context: str | None,
    config: str | None,
    lease_ms: int,
    **kwargs: Any,
) -> None:
    """Mirror a real API server into the store: its nodes, pods and what plugins read;
    the pods of this deployment's profiles get scheduled."""
    from distsched.bridge.main import profile_names, run_bridge
    from distsched.framework.profile import ConfigError

    ctx = make_context(kwargs)
    try:
        profiles = profile_names(config)
    except ConfigError as exc:
        bad_input(str(exc))
    kube = kube_client(kubeconfig, kube_context)
    try:
        run_bridge(ctx.require_url(), ctx.keys, kube, profiles=profiles, lease_ms=lease_ms)
    finally:
        kube.close()
