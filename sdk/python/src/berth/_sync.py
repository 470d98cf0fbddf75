"""The blocking client: the core's ops (_core.py) performed with httpx.Client."""

from __future__ import annotations

import time
from typing import Any, Dict, Generator, Iterator, List, Optional, TypeVar

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
    if hasattr(src, "read"):
        def chunks() -> Iterator[bytes]:
            while True:
                data = src.read(CHUNK)
                if not data:
                    return
                yield data.encode("utf-8") if isinstance(data, str) else data
        return chunks()
    if hasattr(src, "__aiter__"):
        raise TypeError("an async iterable needs AsyncWorkspace; Workspace takes a file object "
                        "or an iterable of bytes")
    return (c.encode("utf-8") if isinstance(c, str) else c for c in src)


class _Stream:
    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.chunks = response.iter_raw()


class Connection:
    """berthd's address, key and an httpx.Client (a pool of keep-alive connections), shared
    by the Workspace objects made from it. Safe to use from several threads."""

    def __init__(self, config: Config) -> None:
        self.core = Core(config)
        self.client = httpx.Client(**client_args(config))

    def close(self) -> None:
        self.client.close()

    # -- the driver --------------------------------------------------------------------------

    def run(self, op: Op[T]) -> T:
        driven = self._drive(op, emit=False)
        try:
            next(driven)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        raise TypeError("an iterating op run as a call")

    def iterate(self, op: Op[Any]) -> Iterator[Any]:
        yield from self._drive(op, emit=True)

    def _drive(self, op: Op[Any], emit: bool) -> Generator[Any, None, Any]:
        opened: List[_Stream] = []
        value: Any = None
        error: Optional[BaseException] = None
        try:
            while True:
                try:
                    effect = op.throw(error) if error is not None else op.send(value)
                except StopIteration as stop:
                    return stop.value
                value, error = None, None
                if isinstance(effect, Emit):
                    if not emit:
                        raise TypeError("an iterating op run as a call")
                    yield effect.value
                    continue
                try:
                    value = self._perform(effect, opened)
                except BerthError as e:
                    error = e
        finally:
            for s in opened:
                s.response.close()
            op.close()

    def _perform(self, effect: Any, opened: List[_Stream]) -> Any:
        if isinstance(effect, Send):
            req = effect.request
            content = _body_iter(req.body) if req.body is not None else req.content
            try:
                response = self.client.send(build(self.client, req, effect.timeouts, content),
                                            stream=True)
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
                for chunk in response.iter_raw():
                    data += chunk
                    if not ok and len(data) > ERROR_BODY_LIMIT:
                        break
                return Reply(response.status_code, headers, bytes(data))
            except WRAPPED as e:
                raise wrap(e, req.what) from None
            finally:
                response.close()
        if isinstance(effect, Read):
            try:
                return next(effect.handle.chunks, b"")
            except WRAPPED as e:
                raise wrap(e, "read stream") from None
        if isinstance(effect, Close):
            effect.handle.response.close()
            return None
        if isinstance(effect, Sleep):
            time.sleep(effect.seconds)
            return None
        if isinstance(effect, Blocking):
            return effect.fn(*effect.args)
        if isinstance(effect, Await):
            raise TypeError("a callback of the sync Workspace returned an awaitable: use "
                            "AsyncWorkspace for async callbacks")
        raise TypeError(f"unknown effect {effect!r}")
