"""Podman for the compose test: how to run containers on this machine, and the images
docker-compose.yml names when no container registry answers.

Images: each of ``python:3.11-slim`` (the Dockerfile's base), ``redis:7.2`` and
``prom/prometheus:v2.54.1`` is used as found in podman's storage, else pulled, else built
here as a stand-in from Debian 12's packages only: a ``debootstrap --variant=minbase
bookworm`` root file system (cached as a tar file, so later builds skip debootstrap)
imported as ``localhost/distsched-standin/debian:bookworm``, then one Containerfile each:

* ``python:3.11-slim``: Debian's python3 (3.11) with a virtual environment at /usr/local,
  so that ``python``, ``python3`` and ``pip`` are on PATH and ``pip install .`` installs
  into /usr/local as in the official image; it trusts the CAs the host added
  (/usr/local/share/ca-certificates: a proxy in front of PyPI) and pip uses that bundle;
* ``redis:7.2``: Debian's redis-server (7.0) behind the official image's entry point rule
  (``redis-server`` without a config file that sets it gets ``--protected-mode no``);
* ``prom/prometheus:v2.54.1``: Debian's prometheus (2.42) as the official image runs it:
  entry point the binary, user nobody, working and data directory /prometheus.

A stand-in carries the label ``io.distsched.standin`` (a hash of its recipe) and is
rebuilt when the recipe changes; an image without the label (the real one) is never
touched.

Runtime: podman's defaults are tried first (``podman run --rm IMAGE true``). Where they
fail, as in a VM without CAP_SYS_RESOURCE (podman asks for 1048576 open files) and with
cgroup v2 controllers in hybrid mode (crun refuses those), a containers.conf is written
that caps the ulimits at what this process may set and picks runc; every podman command
of the test (podman-compose's included) then runs with ``CONTAINERS_CONF`` naming it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

LABEL = "io.distsched.standin"
DEBIAN_BASE = "localhost/distsched-standin/debian:bookworm"
MIRROR = os.environ.get("DISTSCHED_COMPOSE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "distsched" / "compose"
PULL_TIMEOUT_S = 300
BUILD_TIMEOUT_S = 900

SOURCES_LIST = f"""\
deb {MIRROR} bookworm main
deb {MIRROR} bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
"""

APT_INSTALL = (
    "apt-get update -qq"
    " && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {}"
    " >/dev/null && rm -rf /var/lib/apt/lists/*"
)

PYTHON = f"""\
FROM {DEBIAN_BASE}
ENV LANG=C.UTF-8
COPY ca/ /usr/local/share/ca-certificates/
RUN {APT_INSTALL.format("python3 python3-venv ca-certificates")} \\
 && python3 -m venv /usr/local \\
 && printf '[global]\\ncert = /etc/ssl/certs/ca-certificates.crt\\n' > /etc/pip.conf
CMD ["python3"]
"""

REDIS_ENTRYPOINT = """\
#!/bin/sh
# The official redis image's rule: redis-server without a config file that sets
# protected-mode runs with --protected-mode no (the other containers must reach it).
set -e
if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then
  set -- redis-server "$@"
fi
if [ "$1" = redis-server ]; then
  shift
  conf=
  if [ -f "${1:-}" ]; then conf=$1; shift; fi
  if [ -z "$conf" ] || ! grep -q '^protected-mode' "$conf"; then
    set -- --protected-mode no "$@"
  fi
  if [ -n "$conf" ]; then set -- "$conf" "$@"; fi
  set -- redis-server "$@"
fi
exec "$@"
"""

REDIS = f"""\
FROM {DEBIAN_BASE}
RUN {APT_INSTALL.format("redis-server redis-tools")} && mkdir -p /data
COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN chmod 755 /usr/local/bin/docker-entrypoint.sh
VOLUME /data
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["redis-server"]
"""

# Debian's build defaults --storage.tsdb.path to /var/lib/prometheus/metrics2/; the
# official binary's default is data/ under its working directory /prometheus.
PROMETHEUS = f"""\
FROM {DEBIAN_BASE}
RUN {APT_INSTALL.format("prometheus")} \\
 && mkdir -p /prometheus/data && chown -R nobody:nogroup /prometheus \\
 && rm -rf /var/lib/prometheus/metrics2 && ln -s /prometheus/data /var/lib/prometheus/metrics2
USER nobody
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
"""


@dataclass(frozen=True)
class Recipe:
    """A stand-in: its Containerfile and the files of its build context."""

    name: str  # as docker-compose.yml / the Dockerfile name it
    upstream: str  # what a registry would give
    containerfile: str
    files: Mapping[str, bytes] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        h = hashlib.sha256(self.containerfile.encode())
        for path in sorted(self.files):
            h.update(path.encode() + b"\0" + self.files[path] + b"\0")
        return h.hexdigest()[:16]


def host_cas() -> dict[str, bytes]:
    """The CAs the host added to its trust store (a TLS-inspecting proxy's, say)."""
    found = Path("/usr/local/share/ca-certificates")
    if not found.is_dir():
        return {}
    return {f"ca/{p.name}": p.read_bytes() for p in sorted(found.glob("*.crt")) if p.is_file()}


def recipes() -> list[Recipe]:
    return [
        Recipe("python:3.11-slim", "docker.io/library/python:3.11-slim", PYTHON, {**host_cas()}),
        Recipe(
            "redis:7.2",
            "docker.io/library/redis:7.2",
            REDIS,
            {"docker-entrypoint.sh": REDIS_ENTRYPOINT.encode()},
        ),
        Recipe("prom/prometheus:v2.54.1", "docker.io/prom/prometheus:v2.54.1", PROMETHEUS),
    ]


class Unavailable(Exception):
    """Containers cannot run here; the message says what is missing or what failed."""


def run_tool(
    argv: list[str], env: dict[str, str], timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """A command's outcome, its output captured as text (never raises on its exit code)."""
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        check=False,
    )


@dataclass
class Podman:
    """``podman`` with the environment every call of the test uses."""

    env: dict[str, str]
    notes: list[str] = field(default_factory=list)

    def run(
        self, *args: str, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = run_tool(["podman", *args], self.env, timeout)
        if check and proc.returncode != 0:
            raise Unavailable(
                f"`podman {' '.join(args)}` failed ({proc.returncode}): {proc.stderr}"
            )
        return proc

    def exists(self, image: str) -> bool:
        return self.run("image", "exists", image, check=False).returncode == 0

    def label(self, image: str) -> str:
        out = self.run(
            "image", "inspect", "--format", '{{index .Labels "' + LABEL + '"}}', image
        ).stdout.strip()
        return "" if out == "<no value>" else out


def missing_tools(*, standins: bool = True) -> list[str]:
    """What the test needs and this machine lacks (debootstrap only to build stand-ins)."""
    need = ["podman", "podman-compose"] + (["debootstrap"] if standins else [])
    missing = [tool for tool in need if shutil.which(tool) is None]
    if standins and os.geteuid() != 0 and "debootstrap" not in missing:
        missing.append("root (debootstrap and rootful podman)")
    return missing


@contextlib.contextmanager
def cache_lock() -> Iterator[None]:
    """One image preparation at a time (two test runs share podman's storage)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def debian_rootfs_tar() -> Path:
    """debootstrap's minbase bookworm as a tar file, made once and kept in the cache."""
    tar = CACHE / "debian-bookworm-minbase.tar"
    if tar.exists():
        return tar
    if shutil.which("debootstrap") is None:
        raise Unavailable("debootstrap is not installed (apt-get install debootstrap)")
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        root = Path(tmp) / "rootfs"
        proc = subprocess.run(
            ["debootstrap", "--variant=minbase", "bookworm", str(root), MIRROR],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
        if proc.returncode != 0:
            raise Unavailable(f"debootstrap failed ({proc.returncode}): {proc.stdout[-2000:]}")
        (root / "etc/apt/sources.list").write_text(SOURCES_LIST)
        for leftover in ("etc/resolv.conf", "etc/hostname"):
            (root / leftover).unlink(missing_ok=True)
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (root / cache).glob("*"):
                if path.is_file():
                    path.unlink()
        partial = Path(tmp) / "rootfs.tar"
        subprocess.run(
            ["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."], check=True
        )
        partial.replace(tar)
    return tar


def _hard_limit(which: int, cap: int) -> int:
    hard = resource.getrlimit(which)[1]
    return cap if hard == resource.RLIM_INFINITY else min(hard, cap)


def runtime_config(directory: Path) -> Path:
    """A containers.conf for machines where podman's defaults cannot start a container:
    ulimits this process may set (podman itself runs with at most 32768 processes), and
    runc where cgroup v2 controllers sit beside v1 (hybrid mode, which crun refuses)."""
    nofile = _hard_limit(resource.RLIMIT_NOFILE, 1048576)
    nproc = _hard_limit(resource.RLIMIT_NPROC, 32768)
    lines = [
        "[containers]",
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]',
    ]
    controllers = Path("/sys/fs/cgroup/unified/cgroup.controllers")
    if controllers.exists() and controllers.read_text().strip() and shutil.which("runc"):
        lines += ["[engine]", 'runtime = "runc"']
    path = directory / "containers.conf"
    path.write_text("\n".join(lines) + "\n")
    return path


def podman_that_runs(image: str, config_dir: Path, env: Mapping[str, str]) -> Podman:
    """A Podman whose containers start: defaults first, else with :func:`runtime_config`."""
    plain = Podman(dict(env))
    first = plain.run("run", "--rm", "--entrypoint", "true", image, check=False, timeout=120)
    if first.returncode == 0:
        return plain
    conf = runtime_config(config_dir)
    tuned = Podman({**env, "CONTAINERS_CONF": str(conf)})
    second = tuned.run("run", "--rm", "--entrypoint", "true", image, check=False, timeout=120)
    if second.returncode != 0:
        raise Unavailable(
            "podman cannot start a container here:\n"
            f"  with its defaults: {first.stderr.strip()}\n"
            f"  with {conf} ({conf.read_text().strip()!r}): {second.stderr.strip()}"
        )
    tuned.notes.append(
        f"podman's defaults failed ({first.stderr.strip()}); using CONTAINERS_CONF={conf}: "
        + conf.read_text().strip().replace("\n", "; ")
    )
    return tuned


def build(podman: Podman, recipe: Recipe) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp)
        (context / "ca").mkdir()
        (context / "Containerfile").write_text(recipe.containerfile)
        for path, data in recipe.files.items():
            (context / path).parent.mkdir(parents=True, exist_ok=True)
            (context / path).write_bytes(data)
        podman.run(
            "build",
            "--label",
            f"{LABEL}={recipe.digest}",
            "-t",
            recipe.name,
            "-f",
            str(context / "Containerfile"),
            str(context),
            timeout=BUILD_TIMEOUT_S,
        )


def prepare(config_dir: Path, env: Mapping[str, str]) -> tuple[Podman, dict[str, float]]:
    """The images docker-compose.yml needs (all but Grafana's and the project's own, which
    compose builds) present; returns the Podman to use and how long each step took."""
    timings: dict[str, float] = {}
    with cache_lock():
        plain = Podman(dict(env))
        wanted: list[Recipe] = []
        for recipe in recipes():
            if plain.exists(recipe.name):
                current = plain.label(recipe.name)
                if not current or current == recipe.digest:
                    continue  # the real image, or this recipe's stand-in
            elif (
                plain.run("pull", recipe.upstream, check=False, timeout=PULL_TIMEOUT_S).returncode
                == 0
            ):
                plain.run("tag", recipe.upstream, recipe.name)
                continue
            wanted.append(recipe)
        probe_image = DEBIAN_BASE if wanted else recipes()[1].name
        if wanted and not plain.exists(DEBIAN_BASE):
            start = time.monotonic()
            tar = debian_rootfs_tar()
            timings["debootstrap (or cached rootfs)"] = time.monotonic() - start
            start = time.monotonic()
            plain.run("import", "--change", 'CMD ["bash"]', str(tar), DEBIAN_BASE, timeout=600)
            timings["import rootfs"] = time.monotonic() - start
        podman = podman_that_runs(probe_image, config_dir, env)
        for recipe in wanted:
            start = time.monotonic()
            build(podman, recipe)
            timings[f"build {recipe.name}"] = time.monotonic() - start
            podman.notes.append(f"{recipe.name}: stand-in built from Debian packages")
    return podman, timings
