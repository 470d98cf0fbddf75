"""The asyncio client: the core's ops (_core.py) performed with httpx.AsyncClient."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple, TypeVar

import httpx

from ._api import Core
from ._core import (CHUNK, Abort, Adopt, Await, Blocking, Close, Config, Emit, Op, Read, Reply,
                    Send, Sleep, UploadBody, WsRecv, WsSend)
from ._driver import (ERROR_BODY_LIMIT, USER_AGENT, WRAPPED, build, client_args, cut_stream,
                      wrap)
from ._wsproto import WsProtocol, endpoint
from .errors import BerthError, TimeoutError, UnavailableError

T = TypeVar("T")


def _body_iter(body: UploadBody) -> Any:
    src = body.source
    if isinstance(src, (bytes, bytearray, memoryview)):
        return bytes(src)
    if hasattr(src, "__aiter__"):
        async def from_async() -> AsyncIterator[bytes]:
            async for c in src:
                yield c.encode("utf-8") if isinstance(c, str) else c
        return from_async()
    if hasattr(src, "read"):
        async def from_file() -> AsyncIterator[bytes]:
            while True:
                # A file's read may block (a disk, a pipe): on a thread, off the event loop.
                data = await asyncio.to_thread(src.read, CHUNK)
                if not data:
                    return
                yield data.encode("utf-8") if isinstance(data, str) else data
        return from_file()

    async def from_iter() -> AsyncIterator[bytes]:
        for c in src:
            yield c.encode("utf-8") if isinstance(c, str) else c
    return from_iter()


class _Stream:
    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.chunks = response.aiter_raw()


class _AWs:
    """A WebSocket on asyncio streams: one task reads (WsRecv) while others send (`wlock`
    keeps their writes whole). Abort closes the transport, which ends a pending read."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 proto: WsProtocol) -> None:
        self.reader, self.writer, self.proto = reader, writer, proto
        self.wlock = asyncio.Lock()
        self.aborted = False
        self.closed = False
        self.eof = False

    async def write(self, data: bytes) -> None:
        if data:
            async with self.wlock:
                self.writer.write(data)
                await self.writer.drain()

    async def send(self, kind: str, data: bytes) -> None:
        if self.aborted or self.closed:
            raise UnavailableError("the WebSocket is closed", code="unavailable")
        try:
            out = self.proto.send(kind, data)
        except Exception as e:  # websockets' InvalidState: the server closed it
            raise UnavailableError(f"the WebSocket is closed: {e}", code="unavailable") from None
        try:
            await self.write(out)
        except (OSError, ConnectionError) as e:
            raise UnavailableError(f"the WebSocket broke: {e}", code="unavailable") from None

    async def recv(self, timeout: float) -> Tuple[str, bytes]:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            msg = self.proto.next_message()
            if msg is not None:
                return msg
            if self.aborted:
                return ("aborted", b"")
            if self.proto.close_received:
                return ("close", b"")
            if self.eof:
                raise UnavailableError("the WebSocket broke: the connection closed without a "
                                       "close frame", code="unavailable")
            left = end - loop.time()
            if left <= 0:
                return ("idle", b"")
            try:
                data = await asyncio.wait_for(self.reader.read(65536), left)
            except asyncio.TimeoutError:
                return ("idle", b"")
            except (OSError, ConnectionError) as e:
                if self.aborted:
                    return ("aborted", b"")
                raise UnavailableError(f"the WebSocket broke: {e}", code="unavailable") from None
            self.eof = not data
            self.proto.feed(data)
            try:
                await self.write(self.proto.take_output())
            except (OSError, ConnectionError):
                pass

    def abort(self) -> None:
        self.aborted = True
        self.writer.transport.abort()

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if not self.aborted:
            try:
                await asyncio.wait_for(self.write(self.proto.send("close", b"")), 5)
            except (OSError, ConnectionError, UnavailableError, asyncio.TimeoutError):
                pass
        self.aborted = True
        self.writer.transport.abort()


class Job:
    """An op run as a task of its own (a PTY's or a watch's reader)."""

    def __init__(self, conn: "AsyncConnection", op: Op[Any]) -> None:
        self.task = asyncio.get_running_loop().create_task(conn.run(op))
        # Its error is handed to join(); unjoined, it must not be reported as lost.
        self.task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def done(self) -> bool:
        return self.task.done()


class AsyncConnection:
    """berthd's address, key and an httpx.AsyncClient, shared by the AsyncWorkspace objects
    made from it. Use it from one event loop."""

    def __init__(self, config: Config) -> None:
        self.core = Core(config)
        self.client = httpx.AsyncClient(**client_args(config))

    async def close(self) -> None:
        await self.client.aclose()

    async def run(self, op: Op[T]) -> T:
        box: List[Any] = []
        async for _ in self._drive(op, emit=False, box=box):
            pass
        return box[0]  # type: ignore[no-any-return]

    async def iterate(self, op: Op[Any]) -> AsyncIterator[Any]:
        async for v in self._drive(op, emit=True, box=[]):
            yield v

    def spawn(self, op: Op[Any]) -> Job:
        """Runs `op` as a task of its own; its callbacks run in that task."""
        return Job(self, op)

    async def join(self, job: Job, timeout: Optional[float], what: str) -> Any:
        """Waits for a spawned op's end (at most `timeout` seconds) and answers its value or
        raises its error."""
        try:
            return await asyncio.wait_for(asyncio.shield(job.task), timeout)
        except asyncio.TimeoutError:
            if job.task.done():
                raise
            raise TimeoutError(f"{what}: still running after request_timeout ({timeout:g} s)",
                               code="deadline_exceeded") from None

    async def _drive(self, op: Op[Any], emit: bool, box: List[Any]) -> AsyncIterator[Any]:
        opened: List[Any] = []
        value: Any = None
        error: Optional[BaseException] = None
        try:
            while True:
                try:
                    effect = op.throw(error) if error is not None else op.send(value)
                except StopIteration as stop:
                    box.append(stop.value)
                    return
                value, error = None, None
                if isinstance(effect, Emit):
                    if not emit:
                        raise TypeError("an iterating op run as a call")
                    yield effect.value
                    continue
                try:
                    value = await self._perform(effect, opened)
                except BerthError as e:
                    error = e
        finally:
            for s in opened:
                if isinstance(s, _AWs):
                    await s.close()
                else:
                    await s.response.aclose()
            op.close()

    async def _open_ws(self, effect: Send) -> Reply:
        req = effect.request
        host, port, tls, _ = endpoint(self.core.config)
        proto = WsProtocol(self.core.config, req, USER_AGENT)
        t = effect.timeouts
        opened: List[asyncio.StreamWriter] = []
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                host, port, ssl=ssl.create_default_context() if tls else None), t.connect)
            opened.append(writer)
            writer.write(proto.take_output())
            await writer.drain()
            while proto.response is None:
                data = await asyncio.wait_for(reader.read(65536), t.read)
                proto.feed(data)
                if not data and proto.response is None:
                    raise UnavailableError(f"{req.what}: the connection closed before an "
                                           "answer", code="unavailable")
        except asyncio.TimeoutError:
            for w in opened:
                w.transport.abort()
            raise TimeoutError(f"{req.what}: timed out", code="deadline_exceeded") from None
        except (OSError, ConnectionError) as e:
            for w in opened:
                w.transport.abort()
            raise UnavailableError(f"{req.what}: {type(e).__name__}: {e}",
                                   code="unavailable") from None
        status, headers, body = proto.handshake_reply()
        if status != 101:
            writer.transport.abort()
            return Reply(status, headers, body)
        return Reply(status, headers, b"", _AWs(reader, writer, proto))

    async def _perform(self, effect: Any, opened: List[Any]) -> Any:
        if isinstance(effect, Send) and effect.request.websocket:
            return await self._open_ws(effect)
        if isinstance(effect, WsRecv):
            return await effect.handle.recv(effect.timeout)
        if isinstance(effect, WsSend):
            return await effect.handle.send(effect.kind, effect.data)
        if isinstance(effect, Adopt):
            opened.append(effect.handle)
            return None
        if isinstance(effect, Abort):
            if isinstance(effect.handle, _AWs):
                effect.handle.abort()
            else:
                cut_stream(effect.handle.response)
            return None
        if isinstance(effect, Send):
            req = effect.request
            content = _body_iter(req.body) if req.body is not None else req.content
            try:
                response = await self.client.send(
                    build(self.client, req, effect.timeouts, content), stream=True)
            except WRAPPED as e:
                raise wrap(e, req.what) from None
            headers: Dict[str, str] = {k.lower(): v for k, v in response.headers.items()}
            ok = 200 <= response.status_code < 300
            if req.stream and ok:
                stream = _Stream(response)
                if not req.detach:
                    opened.append(stream)
                return Reply(response.status_code, headers, b"", stream)
            try:
                data = bytearray()
                async for chunk in response.aiter_raw():
                    data += chunk
                    if not ok and len(data) > ERROR_BODY_LIMIT:
                        break
                return Reply(response.status_code, headers, bytes(data))
            except WRAPPED as e:
                raise wrap(e, req.what) from None
            finally:
                await response.aclose()
        if isinstance(effect, Read):
            try:
                return await effect.handle.chunks.__anext__()
            except StopAsyncIteration:
                return b""
            except WRAPPED as e:
                raise wrap(e, "read stream") from None
        if isinstance(effect, Close):
            if isinstance(effect.handle, _AWs):
                await effect.handle.close()
            else:
                await effect.handle.response.aclose()
            return None
        if isinstance(effect, Sleep):
            await asyncio.sleep(effect.seconds)
            return None
        if isinstance(effect, Blocking):
            return await asyncio.to_thread(effect.fn, *effect.args)
        if isinstance(effect, Await):
            return await effect.awaitable
        raise TypeError(f"unknown effect {effect!r}")
