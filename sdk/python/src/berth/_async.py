"""The asyncio client: the core's ops (_core.py) performed with httpx.AsyncClient."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Dict, List, Optional, TypeVar

import httpx

from ._api import Core
from ._core import (CHUNK, Await, Blocking, Close, Config, Emit, Op, Read, Reply, Send, Sleep,
                    UploadBody)
from ._driver import ERROR_BODY_LIMIT, WRAPPED, build, client_args, wrap
from .errors import BerthError

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

    async def _drive(self, op: Op[Any], emit: bool, box: List[Any]) -> AsyncIterator[Any]:
        opened: List[_Stream] = []
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
                await s.response.aclose()
            op.close()

    async def _perform(self, effect: Any, opened: List[_Stream]) -> Any:
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
