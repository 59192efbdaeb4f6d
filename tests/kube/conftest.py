"""A real API server for the kube tests: etcd + kube-apiserver (distsched.kube.testenv),
one per test module; the tests skip with the reason when the binaries are not found."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from distsched.kube.client import KubeClient
from distsched.kube.config import load
from distsched.kube.testenv import AssetsMissing, TestEnv, find_assets


def _require_assets() -> None:
    try:
        find_assets("kube-apiserver", "etcd")
    except AssetsMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestEnv]:
    _require_assets()
    env = TestEnv(Path(tmp_path_factory.mktemp("apiserver"))).start()
    yield env
    env.stop()


@pytest.fixture
def kube(apiserver: TestEnv) -> Iterator[KubeClient]:
    client = KubeClient(load(str(apiserver.kubeconfig)))
    yield client
    client.close()
