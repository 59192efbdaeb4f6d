"""The Lua loader: includes expanded, nested ones too, each lib pasted once."""

from __future__ import annotations

from importlib import resources

import pytest
import redis

from distsched.lua import INCLUDE, source

SCRIPTS = sorted(
    p.name.removesuffix(".lua")
    for p in resources.files("distsched.lua").iterdir()
    if p.name.endswith(".lua")
)


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_loads_with_its_includes_expanded(r: redis.Redis, name: str) -> None:
    text = source(name)
    assert not [line for line in text.splitlines() if line.startswith(INCLUDE)]
    r.script_load(text)  # compiles: every helper defined, within Lua's limit of locals


def test_a_lib_included_twice_is_pasted_once() -> None:
    # cache_reserve includes numbers itself and again through queue_record
    assert source("cache_reserve").count("local function number_of(") == 1


def test_a_nested_include_comes_before_its_first_use() -> None:
    # queue_pop includes queue_record alone; queue_record includes numbers
    text = source("queue_pop")
    assert text.count("local function number_of(") == 1
    assert text.index("local function number_of(") < text.index("local function rec_pop(")
