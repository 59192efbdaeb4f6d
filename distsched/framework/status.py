"""The outcome of running a plugin: a code, human-readable reasons and the plugin's name.

Codes and their meaning follow kube-scheduler's framework.Status. ``None`` is accepted
wherever a Status is expected and means Success, as in kube.
"""

from __future__ import annotations

from enum import IntEnum


class Code(IntEnum):
    SUCCESS = 0
    # An internal error: the pod is retried with backoff, no plugin is blamed.
    ERROR = 1
    # The pod does not fit now; preemption may help.
    UNSCHEDULABLE = 2
    # The pod does not fit and preemption on this node would not help.
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    # A Permit plugin asks the pod to wait.
    WAIT = 4
    # PreFilter/PreScore: the plugin has nothing to do for this pod; its Filter/Score is skipped.
    # Bind: the plugin does not handle this pod; the next bind plugin is tried.
    SKIP = 5
    # The pod waits for something outside the scheduler (kube's Pending).
    PENDING = 6


_REJECTED = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})

_CODE_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


class Status:
    __slots__ = ("code", "error", "plugin", "reasons")

    def __init__(
        self,
        code: Code = Code.SUCCESS,
        *reasons: str,
        plugin: str = "",
        error: BaseException | None = None,
    ) -> None:
        self.code = code
        self.reasons: tuple[str, ...] = reasons
        self.plugin = plugin
        self.error = error

    # --- constructors ----------------------------------------------------------------
    @classmethod
    def success(cls) -> Status:
        return _SUCCESS

    @classmethod
    def skip(cls) -> Status:
        return _SKIP

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE, *reasons, plugin=plugin)

    @classmethod
    def unresolvable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons, plugin=plugin)

    @classmethod
    def from_error(cls, error: BaseException, *, plugin: str = "") -> Status:
        return cls(Code.ERROR, str(error), plugin=plugin, error=error)

    # --- predicates ------------------------------------------------------------------
    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    def is_wait(self) -> bool:
        return self.code == Code.WAIT

    def is_error(self) -> bool:
        return self.code == Code.ERROR

    def is_rejected(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending (kube's IsRejected)."""
        return self.code in _REJECTED

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        """A copy of this status attributed to ``plugin`` (shared singletons stay untouched)."""
        return Status(self.code, *self.reasons, plugin=plugin, error=self.error)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return (self.code, self.reasons, self.plugin) == (other.code, other.reasons, other.plugin)

    def __hash__(self) -> int:
        return hash((self.code, self.reasons, self.plugin))

    def __repr__(self) -> str:
        plugin = f" plugin={self.plugin!r}" if self.plugin else ""
        return f"Status({_CODE_NAMES[self.code]}{plugin} {list(self.reasons)!r})"


_SUCCESS = Status(Code.SUCCESS)
_SKIP = Status(Code.SKIP)


def is_success(status: Status | None) -> bool:
    """``None`` counts as Success, like a nil *Status in kube."""
    return status is None or status.code == Code.SUCCESS


class PluginError(Exception):
    """Raised by a plugin for an internal failure; the framework turns it into Code.ERROR."""
