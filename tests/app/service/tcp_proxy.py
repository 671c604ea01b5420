"""``FaultProxy``: a TCP forwarder on 127.0.0.1 between the service and its database that can
fail the way networks and servers do, on command:

- ``refuse()``: stop listening and drop every connection (the server went down: connecting is
  refused at once);
- ``black_hole()``: keep every connection open, and accept new ones, but forward nothing (a
  hung server or a dead route: nothing is refused, nothing answers);
- ``drop()``: close the connections there are (a server restart between two statements);
- ``heal()``: forward again (connections black-holed meanwhile are closed: their byte stream
  lost data, as a real one would time out).

It runs an asyncio loop in a daemon thread; the commands are safe from any thread.
"""

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

CHUNK = 65536


@dataclass(eq=False)
class _Link:
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    black_holed: bool = False

    def close(self) -> None:
        for writer in self.writers:
            writer.close()


class FaultProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._black_hole = False

    # Commands -------------------------------------------------------------------------------
    def start(self) -> "FaultProxy":
        self._thread.start()
        self._call(self._listen())
        return self

    def refuse(self) -> None:
        self._call(self._refuse())

    def black_hole(self) -> None:
        self._call(self._start_black_hole())

    def drop(self) -> None:
        self._call(self._drop(lambda link: True))

    def heal(self) -> None:
        self._call(self._heal())

    def close(self) -> None:
        self._call(self._shut_down())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def _call(self, coroutine: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    # On the loop ------------------------------------------------------------------------------
    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(
                self._accept, "127.0.0.1", self.port, reuse_address=True
            )
            self.port = self._server.sockets[0].getsockname()[1]

    async def _refuse(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        await self._drop(lambda link: True)

    async def _shut_down(self) -> None:
        await self._refuse()
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _start_black_hole(self) -> None:
        self._black_hole = True
        for link in self._links:
            link.black_holed = True

    async def _heal(self) -> None:
        self._black_hole = False
        await self._drop(lambda link: link.black_holed)
        await self._listen()

    async def _drop(self, which: Any) -> None:
        for link in [link for link in self._links if which(link)]:
            link.close()
            self._links.discard(link)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = _Link(writers=[writer], black_holed=self._black_hole)
        self._links.add(link)
        try:
            if link.black_holed:  # accepted, and then nothing: never reaches the server
                await self._swallow(reader, link)
                return
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream)
            link.writers.append(upstream_writer)
            await asyncio.gather(
                self._pipe(reader, upstream_writer, link),
                self._pipe(upstream_reader, writer, link),
            )
        except OSError:
            pass
        finally:
            link.close()
            self._links.discard(link)

    async def _swallow(self, reader: asyncio.StreamReader, link: _Link) -> None:
        while link in self._links and await reader.read(CHUNK):
            pass

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link
    ) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(CHUNK):
                if link.black_holed:
                    continue  # lost on the way
                writer.write(data)
                await writer.drain()
        link.close()


@contextmanager
def fault_proxy(upstream_host: str, upstream_port: int) -> Iterator[FaultProxy]:
    proxy = FaultProxy(upstream_host, upstream_port).start()
    try:
        yield proxy
    finally:
        proxy.close()
