"""A module the binder must never import: importing it or calling ``run`` leaves a trace.

test_safety names ``tests.binder.canary.run`` in crafted rq jobs; the allow-list must
refuse them without importing this module (checked through ``sys.modules``).
"""

from __future__ import annotations

from pathlib import Path

IMPORTED = True


def run(path: str, *_: object) -> None:
    Path(path).write_text("canary ran")
