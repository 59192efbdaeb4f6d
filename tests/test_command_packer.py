"""connection.CommandPacker packs what redis-py's own hiredis packer packs, byte for byte,
and refuses what it refuses; a client made by ``connect`` uses it with real Redis."""

from __future__ import annotations

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from redis.connection import Encoder, HiredisRespSerializer, PythonRespSerializer

from distsched.connection import CommandPacker, RedisOptions, connect

_encode = Encoder("utf-8", "strict", False).encode
REDIS_PY = HiredisRespSerializer(PythonRespSerializer(6000, _encode).pack, _encode)

argument = st.one_of(
    st.text(), st.binary(), st.integers(), st.floats(allow_nan=False), st.just(float("inf"))
)


@given(name=st.sampled_from(["EVALSHA", b"HSET", "XADD"]), args=st.lists(argument, max_size=40))
def test_packs_what_redis_py_packs(name: str | bytes, args: list[object]) -> None:
    assert CommandPacker().pack(name, *args) == REDIS_PY.pack(name, *args)


def wire(chunks: list) -> bytes:
    return b"".join(bytes(chunk) for chunk in chunks)


def test_the_cases_it_leaves_to_redis_py() -> None:
    packer = CommandPacker()
    assert packer.pack("CLIENT SETNAME", "w") == REDIS_PY.pack("CLIENT SETNAME", "w")
    view = memoryview(b"v")  # hiredis packs it too: the same bytes, in one piece
    assert wire(packer.pack("SET", "k", view)) == wire(REDIS_PY.pack("SET", "k", view))
    with pytest.raises(redis.DataError):
        packer.pack("SET", "k", True)
    with pytest.raises(UnicodeEncodeError):
        packer.pack("SET", "k", "\ud800")


def test_a_connect_client_packs_with_it(redis_url: str) -> None:
    client = connect(RedisOptions(redis_url))
    packer = client.connection_pool.connection_kwargs["command_packer"]
    assert isinstance(packer, CommandPacker)
    client.set("packer:k", 0.25)
    assert client.get("packer:k") == b"0.25"
    assert client.client_setname("packer") and client.client_getname() == "packer"
    pipe = client.pipeline()
    pipe.hset("packer:h", mapping={"a": 1, "b": "é"})
    pipe.hgetall("packer:h")
    assert pipe.execute()[1] == {b"a": b"1", b"b": "é".encode()}
    client.delete("packer:k", "packer:h")
