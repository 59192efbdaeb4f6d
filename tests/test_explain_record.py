"""The explain record (q:explain): one writer, one reader, the fields every reader uses."""

from __future__ import annotations

import json

import redis

from distsched.explain_record import (
    Explanation,
    decode_explanations,
    forget_explanations,
    queue_read_explanations,
    read_explanation,
    read_explanations,
    record_failure,
)
from distsched.keys import Keys


def test_a_recorded_failure_reads_back(r: redis.Redis, keys: Keys) -> None:
    written = Explanation(
        "0/3 nodes are available: 3 Insufficient cpu.",
        ("NodeResourcesFit",),
        profile="default-scheduler",
        at_ms=1234,
        queue="unschedulable",
    )
    record_failure(r, keys, "default/p", written)
    assert read_explanation(r, keys, "default/p") == written
    assert read_explanations(r, keys, ["default/p", "default/none"]) == [written, None]
    pipe = r.pipeline(transaction=False)
    queue_read_explanations(pipe, keys, ["default/none", "default/p"])
    [raws] = pipe.execute()
    assert decode_explanations(raws) == [None, written]
    forget_explanations(r, keys, ["default/p"])
    assert read_explanation(r, keys, "default/p") is None


def test_the_json_keeps_the_field_names_readers_rely_on(r: redis.Redis, keys: Keys) -> None:
    record_failure(
        r, keys, "default/p", Explanation("m", ("A",), profile="x", at_ms=5, queue="backoff")
    )
    assert json.loads(r.hget(keys.explain, "default/p")) == {
        "message": "m",
        "plugins": ["A"],
        "profile": "x",
        "at_ms": 5,
        "queue": "backoff",
    }


def test_a_record_without_profile_or_plugins_reads_with_defaults() -> None:
    # The binder's record has no profile; an older record may lack plugins.
    assert Explanation.from_json('{"message": "binding to n1 failed", "queue": "backoff"}') == (
        Explanation("binding to n1 failed", None, profile="", at_ms=None, queue="backoff")
    )
