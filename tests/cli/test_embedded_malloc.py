"""The embedded server's allocator: the bundled valkey-server is built with glibc's malloc,
which costs it about a third more CPU per pod than jemalloc; a system jemalloc is
preloaded when there is one, and DISTSCHED_REDIS_MALLOC overrides the choice."""

from __future__ import annotations

import ctypes.util
import shutil
from pathlib import Path

import pytest
import redis

from distsched import embedded
from distsched.embedded import MALLOC_ENV, EmbeddedRedis, malloc_preload, server_binary


def _mapped_libraries(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def _started(monkeypatch: pytest.MonkeyPatch, choice: str | None) -> tuple[str, str]:
    if choice is None:
        monkeypatch.delenv(MALLOC_ENV, raising=False)
    else:
        monkeypatch.setenv(MALLOC_ENV, choice)
    server = EmbeddedRedis(appendfsync="no").start()
    try:
        assert server.process is not None
        client = redis.Redis.from_url(server.url)
        client.set("k", "v")
        assert client.get("k") == b"v"
        client.close()
        return server.malloc, _mapped_libraries(server.process.pid)
    finally:
        server.stop()


def test_a_system_jemalloc_is_preloaded_into_a_libc_malloc_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not embedded._builds_with_libc_malloc(server_binary()):
        pytest.skip("the embedded binary is not a malloc=libc build")
    if ctypes.util.find_library("jemalloc") is None:
        pytest.skip("no jemalloc library on this machine (Debian: libjemalloc2)")
    malloc, maps = _started(monkeypatch, None)
    assert "jemalloc" in malloc
    assert "libjemalloc" in maps


def test_libc_keeps_the_server_as_built(monkeypatch: pytest.MonkeyPatch) -> None:
    if not embedded._builds_with_libc_malloc(server_binary()):
        pytest.skip("the embedded binary is not a malloc=libc build (it may link jemalloc)")
    malloc, maps = _started(monkeypatch, "libc")
    assert malloc == "as built"
    assert "libjemalloc" not in maps


def test_the_environment_names_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MALLOC_ENV, "/opt/lib/libtcmalloc_minimal.so.4")
    assert malloc_preload(server_binary()) == "/opt/lib/libtcmalloc_minimal.so.4"


def test_a_jemalloc_build_is_never_given_another_allocator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(MALLOC_ENV, raising=False)
    redis_server = shutil.which("redis-server")
    if redis_server is None or embedded._builds_with_libc_malloc(Path(redis_server)):
        pytest.skip("no jemalloc-built redis-server on PATH")
    assert malloc_preload(Path(redis_server)) is None
