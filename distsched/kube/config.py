"""Where the API server is and how to authenticate to it: a kubeconfig file, or the pod's
service account when running inside a cluster (client-go's clientcmd and rest.InClusterConfig,
reduced to what a scheduler needs).

kubeconfig: the current context (or ``context``) picks a cluster and a user. Cluster:
``server``, ``certificate-authority`` / ``certificate-authority-data`` (PEM, base64),
``insecure-skip-tls-verify``, ``tls-server-name``. User: ``token`` / ``tokenFile``,
``client-certificate`` / ``client-certificate-data`` with ``client-key`` /
``client-key-data``, ``username`` / ``password`` (basic). Relative paths are relative to the
kubeconfig file, as kubectl reads them. Exec and auth-provider plugins are refused with a
clear message (a scheduler runs with a service account or a static credential).

In-cluster: ``KUBERNETES_SERVICE_HOST`` / ``KUBERNETES_SERVICE_PORT``, the service
account's token (re-read from its file, since bound tokens rotate) and CA.

Every problem is a :class:`KubeConfigError` whose message names the file and the field.
"""

from __future__ import annotations

import base64
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
KUBECONFIG_ENV = "KUBECONFIG"


class KubeConfigError(Exception):
    """A kubeconfig (or in-cluster configuration) that cannot be used; the message is one
    line naming the file and the field."""


@dataclass
class KubeConfig:
    """What a client needs to reach one API server."""

    server: str
    ca_file: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    token: str | None = None
    token_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    username: str | None = None
    password: str | None = None
    namespace: str = "default"
    source: str = ""
    _temp: list[str] = field(default_factory=list, repr=False)

    def bearer_token(self) -> str | None:
        """The token to send now (a token file is read each time: bound tokens rotate)."""
        if self.token_file:
            try:
                return Path(self.token_file).read_text().strip()
            except OSError as exc:
                raise KubeConfigError(f"{self.source}: tokenFile {self.token_file}: {exc}") from exc
        return self.token


def load(path: str | None = None, *, context: str | None = None) -> KubeConfig:
    """The configuration to use: ``path`` (a kubeconfig file) when given, else
    ``$KUBECONFIG`` (its first file), else the in-cluster service account when running in a
    pod, else ``~/.kube/config``."""
    if path:
        return load_kubeconfig(path, context=context)
    env = os.environ.get(KUBECONFIG_ENV, "").split(os.pathsep)[0]
    if env:
        return load_kubeconfig(env, context=context)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster()
    return load_kubeconfig(str(Path.home() / ".kube" / "config"), context=context)


def in_cluster(sa_dir: Path = SERVICE_ACCOUNT_DIR) -> KubeConfig:
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise KubeConfigError("in-cluster: KUBERNETES_SERVICE_HOST is not set")
    token = sa_dir / "token"
    if not token.exists():
        raise KubeConfigError(f"in-cluster: {token}: no service account token")
    namespace_file = sa_dir / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.exists() else "default"
    host = f"[{host}]" if ":" in host else host
    ca = sa_dir / "ca.crt"
    return KubeConfig(
        server=f"https://{host}:{port}",
        ca_file=str(ca) if ca.exists() else None,
        token_file=str(token),
        namespace=namespace,
        source="in-cluster",
    )


def load_kubeconfig(path: str, *, context: str | None = None) -> KubeConfig:
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise KubeConfigError(f"{source}: cannot read: {exc.strerror or exc}") from exc
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KubeConfigError(f"{source}: not YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(doc, dict):
        raise KubeConfigError(f"{source}: not a kubeconfig (expected a mapping)")
    base = Path(path).resolve().parent
    name = context or doc.get("current-context")
    if not name:
        raise KubeConfigError(f"{source}: current-context: no context selected")
    ctx = _named(doc, "contexts", "context", name, source)
    cluster = _named(doc, "clusters", "cluster", ctx.get("cluster"), source)
    user_name = ctx.get("user")
    user = _named(doc, "users", "user", user_name, source) if user_name else {}
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        raise KubeConfigError(
            f"{source}: clusters[{ctx.get('cluster')}].server: not an http(s) URL"
        )
    for plugin in ("exec", "auth-provider"):
        if user.get(plugin):
            raise KubeConfigError(
                f"{source}: users[{user_name}].{plugin}: credential plugins are not supported; "
                "use a token, a token file or a client certificate"
            )
    config = KubeConfig(
        server=server.rstrip("/"),
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        tls_server_name=cluster.get("tls-server-name"),
        token=user.get("token"),
        token_file=_path(user.get("tokenFile"), base),
        username=user.get("username"),
        password=user.get("password"),
        namespace=str(ctx.get("namespace") or "default"),
        source=source,
    )
    config.ca_file = _file_or_data(
        config, cluster, "certificate-authority", base, f"clusters[{ctx.get('cluster')}]"
    )
    where = f"users[{user_name}]"
    config.client_cert = _file_or_data(config, user, "client-certificate", base, where)
    config.client_key = _file_or_data(config, user, "client-key", base, where)
    if bool(config.client_cert) != bool(config.client_key):
        raise KubeConfigError(
            f"{source}: {where}: a client certificate needs its key, and the key its certificate"
        )
    return config


def _named(doc: dict[str, Any], section: str, inner: str, name: Any, source: str) -> dict[str, Any]:
    for entry in doc.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(inner)
            if not isinstance(value, dict):
                raise KubeConfigError(f"{source}: {section}[{name}].{inner}: missing")
            return value
    raise KubeConfigError(f"{source}: {section}: no entry named {name!r}")


def _path(value: Any, base: Path) -> str | None:
    if not value:
        return None
    path = Path(str(value)).expanduser()
    return str(path if path.is_absolute() else base / path)


def _file_or_data(
    config: KubeConfig, section: dict[str, Any], name: str, base: Path, where: str
) -> str | None:
    """A file path for ``name``: its own path, or ``name-data`` (base64 PEM) written to a
    private temporary file (TLS libraries want files)."""
    data = section.get(f"{name}-data")
    if data:
        try:
            pem = base64.b64decode(data, validate=True)
        except (ValueError, TypeError) as exc:
            raise KubeConfigError(f"{config.source}: {where}.{name}-data: not base64") from exc
        fd, tmp = tempfile.mkstemp(prefix="distsched-kube-", suffix=".pem")
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        config._temp.append(tmp)
        return tmp
    path = _path(section.get(name), base)
    if path and not Path(path).exists():
        raise KubeConfigError(f"{config.source}: {where}.{name}: {path} does not exist")
    return path
