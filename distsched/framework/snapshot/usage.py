"""What is in use on each node: requested resources, scoring's non-zero requests, host ports.

Two ways to know it. A standalone snapshot (replay, the perfchecks, tests) is charged pod
by pod as pods are placed (``charge``). A scheduling worker's snapshot mirrors the Redis
ledger instead (``usage_from_ledger``): the ledger is the truth for requested resources,
pod counts, host ports and non-zero requests, and it also holds other workers' assumed
pods. Its change feed brings absolute usages (``set_usage``, ``set_usages``), and the
worker charges the pod it is placing before the ledger confirms it (``add_usage``).

Writes go to the node table's ``requested``, ``free`` (allocatable - requested) and
``nonzero_requested`` arrays and bump the slot's generation. Host ports are held here,
per slot with the number of pods holding each, plus two inverted indexes for
``port_conflict_slots``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot.table import CPU_COL, MEMORY_COL, PODS_COL, NodeTable
from distsched.model import HostPort

_ROW_CACHE = 100_000
_FEED_ROWS = 4096  # distinct requested mappings set_usages keeps a row for


class Usage:
    def __init__(self, table: NodeTable) -> None:
        self._table = table
        self._ports: list[dict[HostPort, int]] = [{} for _ in range(table.capacity)]
        self._port_any_ip: dict[tuple[str, int], set[int]] = {}
        self._port_exact: dict[HostPort, set[int]] = {}
        self._rows: dict[str, tuple[PodInfo, np.ndarray]] = {}  # requested_row's
        # set_usages': id(requested mapping) -> (the mapping, its row), for rows this wide
        self._feed_rows: dict[int, tuple[Mapping[str, int], tuple[int, ...]]] = {}
        self._feed_rows_width = len(table.resource_names)

    def host_ports(self, index: int) -> dict[HostPort, int]:
        """Host ports in use on the node, with the number of pods holding each."""
        return self._ports[index]

    def port_conflict_slots(self, port: HostPort) -> set[int]:
        """Slots where a pod wanting ``port`` would conflict with a port already in use
        (a read-only view: do not mutate the returned set).

        Same rule as kube's HostPortInfo.CheckConflict: a wildcard 0.0.0.0 request clashes
        with that protocol/port on any address; a specific address clashes with itself
        and with 0.0.0.0.
        """
        if port.ip == "0.0.0.0":
            return self._port_any_ip.get((port.protocol, port.port), set())
        wildcard = HostPort("0.0.0.0", port.protocol, port.port)
        return self._port_exact.get(port, set()) | self._port_exact.get(wildcard, set())

    # ------------------------------------------------------------------ pod by pod
    def charge(self, index: int, info: PodInfo, sign: int) -> None:
        """requested/free (one pod, its requests), scoring's non-zero requests and host
        ports of one pod, +1 or -1. Bumps no generation: the caller does."""
        table = self._table
        table.nonzero_requested[index, 0] += sign * info.nonzero_cpu
        table.nonzero_requested[index, 1] += sign * info.nonzero_memory
        for resource, amount in info.requests.items():
            col = table.resource_index.get(resource)
            if col is None:
                col = table.column(resource)
            if col != PODS_COL:
                table.requested[index, col] += sign * amount
                table.free[index, col] -= sign * amount
        table.requested[index, PODS_COL] += sign
        table.free[index, PODS_COL] -= sign
        if info.host_ports:
            self._account_ports(index, info.host_ports, sign)

    def requested_row(self, info: PodInfo) -> np.ndarray:
        """What :meth:`charge` adds to a node's ``requested`` row for the pod (a row of the
        table's columns: its requests, and 1 pod). Read-only; kept for the same PodInfo
        while the table has the same columns (preemption's dry runs ask again and again)."""
        table = self._table
        known = self._rows.get(info.key)
        if known is not None and known[0] is info and len(known[1]) == len(table.resource_names):
            return known[1]
        row = self._requested_row(info)
        row.flags.writeable = False
        if len(self._rows) >= _ROW_CACHE:
            self._rows.clear()
        self._rows[info.key] = (info, row)
        return row

    def _requested_row(self, info: PodInfo) -> np.ndarray:
        table = self._table
        columns = [table.resource_index.get(r) for r in info.requests]
        if any(col is None for col in columns):
            for resource in info.requests:
                table.column(resource)  # new columns first: the row has them all
        row = np.zeros(len(table.resource_names), dtype=np.int64)
        for resource, amount in info.requests.items():
            col = table.resource_index[resource]
            if col != PODS_COL:
                row[col] += amount
        row[PODS_COL] += 1
        return row

    def add_usage(self, index: int, info: PodInfo, sign: int = 1) -> None:
        """Charge (or with ``sign=-1`` refund) a pod this worker is placing, before the
        ledger confirms it; the next :meth:`set_usage` of the node supersedes it."""
        self.charge(index, info, sign)
        self._table.touch(index)

    # ------------------------------------------------------------------ from the ledger
    def set_usage(
        self,
        index: int,
        requested: dict[str, int],
        ports: Iterable[tuple[str, str, int]],
        nonzero_extra: tuple[int, int] = (0, 0),
    ) -> None:
        """Replace the node's requested resources (``pods`` = pod count) and used host
        ports with absolute values from the ledger; scoring's non-zero cpu and memory are
        the requested ones plus ``nonzero_extra`` (what kube's 100m / 200Mi defaults add
        over the pods' requests)."""
        table = self._table
        row = np.zeros(len(table.resource_names), dtype=np.int64)
        for resource, amount in requested.items():
            col = table.resource_index.get(resource)
            if col is None:
                col = table.column(resource)
                row = np.append(row, 0)
            row[col] = amount
        table.requested[index, :] = row
        table.free[index, :] = table.allocatable[index, :] - row
        table.nonzero_requested[index, 0] = row[CPU_COL] + nonzero_extra[0]
        table.nonzero_requested[index, 1] = row[MEMORY_COL] + nonzero_extra[1]
        wanted: dict[HostPort, int] = {}
        for port in ports:
            key = HostPort(*port)
            wanted[key] = wanted.get(key, 0) + 1
        current = dict(self._ports[index])
        if current != wanted:
            for port, count in current.items():
                self._account_ports(index, (port,) * count, -1)
            for port, count in wanted.items():
                self._account_ports(index, (port,) * count, 1)
        table.touch(index)

    def set_usages(
        self,
        indices: Sequence[int],
        requested: Sequence[Mapping[str, int]],
        nonzero_extra: Sequence[tuple[int, int]],
    ) -> None:
        """:meth:`set_usage` of many distinct nodes that hold no host port, at once (the
        ledger's change feed brings one usage per node another worker placed a pod on).
        A row is made once per requested mapping (the feed's parser shares one between
        all nodes with the same amounts) while the table keeps its columns."""
        count = len(indices)
        if not count:
            return
        table = self._table
        # An entry keeps its mapping alive, so the id names no other object meanwhile.
        known = self._feed_rows
        rows_in: list[tuple[int, ...]] = []
        for amounts in requested:
            cached = known.get(id(amounts))
            if cached is None:
                cached = (amounts, self._usage_row(amounts))
                if len(known) >= _FEED_ROWS:
                    known.clear()
                known[id(amounts)] = cached
            rows_in.append(cached[1])
        width = len(table.resource_names)
        if width != self._feed_rows_width:
            # Rare: a resource no node had got a column (in this call or since the last):
            # rows made before it lack only its zero; widen them and start the cache again.
            rows_in = [row + (0,) * (width - len(row)) for row in rows_in]
            self._feed_rows.clear()
            self._feed_rows_width = width
        slots = np.fromiter(indices, dtype=np.int64, count=count)
        rows = np.array(rows_in, dtype=np.int64).reshape(count, width)
        extra = np.array(nonzero_extra, dtype=np.int64).reshape(count, 2)
        nonzero = np.empty((count, 2), dtype=np.int64)
        nonzero[:, 0] = rows[:, CPU_COL] + extra[:, 0]
        nonzero[:, 1] = rows[:, MEMORY_COL] + extra[:, 1]
        # A node whose usage is what the view holds already (this worker's own
        # reservations, assumed at the decision, come back through the feed) keeps its
        # generation: the answers cached for it still hold.
        changed = (table.requested[slots] != rows).any(axis=1)
        changed |= (table.nonzero_requested[slots] != nonzero).any(axis=1)
        table.requested[slots] = rows
        table.free[slots] = table.allocatable[slots] - rows
        table.nonzero_requested[slots] = nonzero
        if self._port_exact:  # some node holds a host port (every held port is there)
            for at, index in enumerate(indices):
                if self._ports[index]:
                    self._clear_ports(index)
                    changed[at] = True
        table.touch_many(slots[changed])

    def _usage_row(self, amounts: Mapping[str, int]) -> tuple[int, ...]:
        """A ``requested`` row of the table's columns from absolute amounts (a resource no
        node had gets its column)."""
        table = self._table
        row = [0] * len(table.resource_names)
        for resource, amount in amounts.items():
            col = table.resource_index.get(resource)
            if col is None:
                col = table.column(resource)
                row.extend([0] * (len(table.resource_names) - len(row)))
            row[col] = amount
        return tuple(row)

    # ------------------------------------------------------------------ slots
    def remove_node(self, index: int) -> None:
        """The node leaves its slot: no host port is in use there any more (the table
        zeroes the slot's rows)."""
        if self._ports[index]:
            self._clear_ports(index)

    def grow(self, capacity: int) -> None:
        self._ports.extend({} for _ in range(capacity - len(self._ports)))

    # ------------------------------------------------------------------ host ports
    def _clear_ports(self, index: int) -> None:
        for port, count in list(self._ports[index].items()):
            self._account_ports(index, (port,) * count, -1)

    def _account_ports(self, index: int, ports: tuple[HostPort, ...], sign: int) -> None:
        used = self._ports[index]
        for port in ports:
            count = used.get(port, 0) + sign
            if count > 0:
                used[port] = count
                if count == 1 and sign > 0:
                    self._port_exact.setdefault(port, set()).add(index)
                    self._port_any_ip.setdefault((port.protocol, port.port), set()).add(index)
                continue
            used.pop(port, None)
            exact = self._port_exact.get(port)
            if exact is not None:
                exact.discard(index)
                if not exact:
                    del self._port_exact[port]
            if not any((p.protocol, p.port) == (port.protocol, port.port) for p in used):
                nodes = self._port_any_ip.get((port.protocol, port.port))
                if nodes is not None:
                    nodes.discard(index)
                    if not nodes:
                        del self._port_any_ip[(port.protocol, port.port)]
