"""The blocking client: the core's ops (_core.py) performed with httpx.Client."""

from __future__ import annotations

import select
import socket
import ssl
import threading
import time
from typing import Any, Dict, Generator, Iterator, List, Optional, Tuple, TypeVar

import httpx

from ._api import Core
from ._core import (CHUNK, Abort, Adopt, Await, Blocking, Close, Config, Emit, Op, Read, Reply,
                    Send, Sleep, UploadBody, WsRecv, WsSend)
from ._driver import (ERROR_BODY_LIMIT, USER_AGENT, WRAPPED, build, client_args, cut_stream,
                      set_nodelay, wrap)
from ._wsproto import WsProtocol, endpoint
from .errors import BerthError, TimeoutError, UnavailableError

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


class _Ws:
    """A WebSocket on a blocking socket. One thread reads (WsRecv) while others may send:
    `lock` guards the protocol object and writes. Abort shuts the socket down, which wakes
    the reader at once; the socket is closed by whoever sees it last."""

    def __init__(self, sock: socket.socket, proto: WsProtocol) -> None:
        self.sock, self.proto = sock, proto
        self.lock = threading.Lock()
        self.aborted = False
        self.closed = False
        self.eof = False

    def write(self, data: bytes) -> None:
        if data:
            self.sock.sendall(data)

    def send(self, kind: str, data: bytes) -> None:
        with self.lock:
            if self.aborted or self.closed:
                raise UnavailableError("the WebSocket is closed", code="unavailable")
            try:
                self.write(self.proto.send(kind, data))
            except OSError as e:
                raise UnavailableError(f"the WebSocket broke: {e}", code="unavailable") from None
            except Exception as e:  # websockets' InvalidState: the server closed it
                raise UnavailableError(f"the WebSocket is closed: {e}",
                                       code="unavailable") from None

    def recv(self, timeout: float) -> Tuple[str, bytes]:
        end = time.monotonic() + timeout
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
            left = end - time.monotonic()
            pending = isinstance(self.sock, ssl.SSLSocket) and self.sock.pending() > 0
            if not pending:
                if left <= 0:
                    return ("idle", b"")
                try:
                    ready, _, _ = select.select([self.sock], [], [], left)
                except (OSError, ValueError):
                    ready = [self.sock]
                if not ready:
                    return ("idle", b"")
            with self.lock:
                if self.aborted:
                    return ("aborted", b"")
                try:
                    data = self.sock.recv(65536)
                except (socket.timeout, ssl.SSLWantReadError):
                    continue
                except OSError as e:
                    if self.aborted:
                        return ("aborted", b"")
                    raise UnavailableError(f"the WebSocket broke: {e}",
                                           code="unavailable") from None
                self.eof = not data
                self.proto.feed(data)
                try:
                    self.write(self.proto.take_output())
                except OSError:
                    pass

    def abort(self) -> None:
        self.aborted = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            if not self.aborted:
                try:
                    self.write(self.proto.send("close", b""))
                except (OSError, UnavailableError):
                    pass
            self.aborted = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class Job:
    """An op run on a thread of its own (a PTY's or a watch's reader); join() gives its end."""

    def __init__(self, conn: "Connection", op: Op[Any]) -> None:
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._main, args=(conn, op), daemon=True,
                                       name="berth-stream")
        self.thread.start()

    def _main(self, conn: "Connection", op: Op[Any]) -> None:
        try:
            self.result = conn.run(op)
        except BaseException as e:  # noqa: BLE001 - handed to join()
            self.error = e

    def done(self) -> bool:
        return not self.thread.is_alive()


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

    def spawn(self, op: Op[Any]) -> Job:
        """Runs `op` on a thread of its own; its callbacks run on that thread."""
        return Job(self, op)

    def join(self, job: Job, timeout: Optional[float], what: str) -> Any:
        """Waits for a spawned op's end (at most `timeout` seconds) and answers its value or
        raises its error."""
        job.thread.join(timeout)
        if job.thread.is_alive():
            raise TimeoutError(f"{what}: still running after request_timeout ({timeout:g} s)",
                               code="deadline_exceeded")
        if job.error is not None:
            raise job.error
        return job.result

    def _drive(self, op: Op[Any], emit: bool) -> Generator[Any, None, Any]:
        opened: List[Any] = []
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
                if isinstance(s, _Ws):
                    s.close()
                else:
                    s.response.close()
            op.close()

    def _open_ws(self, effect: Send) -> Reply:
        req = effect.request
        host, port, tls, _ = endpoint(self.core.config)
        proto = WsProtocol(self.core.config, req, USER_AGENT)
        t = effect.timeouts
        try:
            sock = socket.create_connection((host, port), timeout=t.connect)
            if tls:
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
            sock.settimeout(t.read)
            sock.sendall(proto.take_output())
            while proto.response is None:
                data = sock.recv(65536)
                proto.feed(data)
                if not data and proto.response is None:
                    raise UnavailableError(f"{req.what}: the connection closed before an "
                                           "answer", code="unavailable")
        except socket.timeout:
            raise TimeoutError(f"{req.what}: timed out", code="deadline_exceeded") from None
        except OSError as e:
            raise UnavailableError(f"{req.what}: {type(e).__name__}: {e}",
                                   code="unavailable") from None
        status, headers, body = proto.handshake_reply()
        if status != 101:
            sock.close()
            return Reply(status, headers, body)
        sock.settimeout(30.0)  # a write that cannot go on for this long is a dead link
        return Reply(status, headers, b"", _Ws(sock, proto))

    def _perform(self, effect: Any, opened: List[Any]) -> Any:
        if isinstance(effect, Send) and effect.request.websocket:
            return self._open_ws(effect)
        if isinstance(effect, WsRecv):
            return effect.handle.recv(effect.timeout)
        if isinstance(effect, WsSend):
            return effect.handle.send(effect.kind, effect.data)
        if isinstance(effect, Adopt):
            opened.append(effect.handle)
            return None
        if isinstance(effect, Abort):
            if isinstance(effect.handle, _Ws):
                effect.handle.abort()
            else:
                cut_stream(effect.handle.response)
            return None
        if isinstance(effect, Send):
            req = effect.request
            content = _body_iter(req.body) if req.body is not None else req.content
            try:
                response = self.client.send(build(self.client, req, effect.timeouts, content),
                                            stream=True)
            except WRAPPED as e:
                raise wrap(e, req.what) from None
            set_nodelay(response)
            headers: Dict[str, str] = {k.lower(): v for k, v in response.headers.items()}
            ok = 200 <= response.status_code < 300
            if req.stream and ok:
                stream = _Stream(response)
                if not req.detach:
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
            if isinstance(effect.handle, _Ws):
                effect.handle.close()
            else:
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
