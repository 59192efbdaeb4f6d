"""A TCP proxy between distsched processes and Redis that adds latency and resets
connections on demand (network faults without root or tc).

It runs an asyncio loop in a daemon thread. Each direction of each connection forwards
what it reads after ``latency_s``, in order; :meth:`FaultProxy.reset_all` aborts every
open connection with a TCP RST (SO_LINGER 0), as a dropped NAT entry or a restarted
load balancer would.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")
CHUNK = 65536


class FaultProxy:
    def __init__(self, target_host: str, target_port: int, *, latency_s: float = 0.0) -> None:
        self.target = (target_host, target_port)
        self.latency_s = latency_s
        self.host = "127.0.0.1"
        self.port = 0
        self.resets = 0
        self.connections_seen = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, name="proxy", daemon=True)

    def url(self, db: int = 0) -> str:
        return f"redis://{self.host}:{self.port}/{db}"

    def _call(self, coro: Awaitable[T], timeout_s: float = 10.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)  # type: ignore[arg-type]

    def start(self) -> FaultProxy:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._accept, self.host, 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            self._abort_all()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._call(close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def reset_all(self) -> int:
        """Abort every open connection with RST; returns how many were cut."""

        async def reset() -> int:
            return self._abort_all()

        cut = self._call(reset())
        self.resets += 1
        return cut

    def _abort_all(self) -> int:
        writers = list(self._open)
        self._open.clear()
        for writer in writers:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        return len(writers) // 2

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections_seen += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._open |= {writer, up_writer}
        await asyncio.gather(
            self._pipe(reader, up_writer, writer), self._pipe(up_reader, writer, up_writer)
        )

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: asyncio.StreamWriter
    ) -> None:
        """Forward reader -> writer, each chunk ``latency_s`` after it arrived, in order."""
        pending: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await pending.get()
                if not data:
                    return
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if writer.is_closing():
                    return
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(deliver())
        try:
            while True:
                data = await reader.read(CHUNK)
                await pending.put((time.monotonic() + self.latency_s, data))
                if not data:
                    break
            await sender
        except (ConnectionError, OSError):
            pass
        finally:
            sender.cancel()
            for end in (writer, peer):
                if end in self._open:
                    self._open.discard(end)
                    end.transport.abort()
