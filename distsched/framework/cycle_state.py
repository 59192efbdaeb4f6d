"""Per-scheduling-cycle scratch space shared by the plugins of one profile."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

_SCALARS = (str, int, float, bool, type(None))


def is_plain(value: Any) -> bool:
    """Whether ``value`` is plain data (str/int/float/bool/None, lists and str-keyed
    dicts of those): what can travel to the binder process with a binding."""
    if isinstance(value, int) and not isinstance(value, bool):
        return -(2**63) <= value < 2**64  # what msgpack carries
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, list | tuple):
        return all(is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_plain(v) for k, v in value.items())
    return False


@runtime_checkable
class StateData(Protocol):
    """Optional protocol for values that must be deep-copied when the state is cloned."""

    def clone(self) -> Any: ...


# isinstance against a runtime-checkable Protocol walks the protocol's attributes on every
# call; preemption clones the state once per node it simulates, so decide once per type.
_CLONEABLE: dict[type, bool] = {}


def _cloneable(value: Any) -> bool:
    kind = type(value)
    known = _CLONEABLE.get(kind)
    if known is None:
        known = _CLONEABLE[kind] = isinstance(value, StateData)
    return known


class CycleState:
    """A dict of plugin data for one pod's scheduling cycle.

    ``clone`` copies the dict and calls ``clone()`` on values that provide one (preemption
    simulates "what if these victims were gone" on a clone and must not disturb the
    original). Values without ``clone`` are shared, which is right for immutable data.
    """

    __slots__ = ("_data", "skip_filter_plugins", "skip_score_plugins")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        # Filled by the framework from PreFilter/PreScore results that returned Skip.
        self.skip_filter_plugins: frozenset[str] = frozenset()
        self.skip_score_plugins: frozenset[str] = frozenset()

    def read(self, key: str) -> Any:
        """The value under ``key``; KeyError when absent (a plugin's PreX did not run)."""
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def to_wire(self) -> dict[str, Any]:
        """The plain-data entries (:func:`is_plain`): the part of the scheduling cycle's
        state the binding cycle gets in the binder process. Other values (numpy arrays,
        objects) stay in the worker; a plugin that needs one in PreBind/Bind/PostBind
        must store it as plain data."""
        return {k: v for k, v in self._data.items() if is_plain(v)}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> CycleState:
        state = cls()
        state._data.update(data)
        return state

    def clone(self) -> CycleState:
        copy = CycleState()
        for key, value in self._data.items():
            copy._data[key] = value.clone() if _cloneable(value) else value
        copy.skip_filter_plugins = self.skip_filter_plugins
        copy.skip_score_plugins = self.skip_score_plugins
        return copy
