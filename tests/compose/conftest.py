"""The compose end-to-end test runs only when selected (`python -m pytest -m compose
tests/compose`): it builds images and starts containers, which the default run must not."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    markexpr = config.option.markexpr or ""
    if "compose" in markexpr and "not compose" not in markexpr:
        return
    skip = pytest.mark.skip(reason="builds and runs containers: python -m pytest -m compose")
    for item in items:
        if item.get_closest_marker("compose") is not None:
            item.add_marker(skip)
