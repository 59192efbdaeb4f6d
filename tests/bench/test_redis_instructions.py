"""python -m distsched.bench.redis_instructions: the instruction total read from
callgrind's output, and (slow, needs valgrind) a real count that grows with the pods."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from distsched.bench.redis_instructions import _total, count


def test_the_total_is_read_from_either_line_callgrind_writes(tmp_path: Path) -> None:
    out = tmp_path / "callgrind.out"
    out.write_text("version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 1315797246\n")
    assert _total(out) == 1315797246
    out.write_text("events: Ir\nfn=main\n0 12\ntotals: 4216\n")
    assert _total(out) == 4216
    out.write_text("events: Ir\n")
    with pytest.raises(SystemExit, match="no instruction total"):
        _total(out)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not on PATH")
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not on PATH")
def test_more_pods_cost_more_instructions() -> None:
    small = count("redis-server", nodes=100, pods=100)
    large = count("redis-server", nodes=100, pods=300)
    assert 0 < small < large
