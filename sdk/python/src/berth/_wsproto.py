"""The WebSocket client protocol both drivers use for GET …/exec/ws: websockets' sans-I/O
connection (ClientProtocol, named ClientConnection before websockets 11) does the handshake
and the framing; the drivers only move bytes (a socket and a thread in _sync.py, asyncio
streams in _async.py). Messages come out whole (fragments joined), pings are answered by the
protocol object itself."""

from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple
from urllib.parse import urlencode, urlsplit

import websockets.client as _wsc
from websockets.frames import Opcode
from websockets.uri import parse_uri

from ._core import Config, Request
from .errors import InternalError, UnavailableError

# websockets >= 11 calls the sans-I/O client ClientProtocol; 10.x (Debian 12) ClientConnection.
_Protocol: Any = getattr(_wsc, "ClientProtocol", None) or getattr(_wsc, "ClientConnection")
#: The largest message accepted from the agent (its frames are output chunks, far smaller).
MAX_MESSAGE = 16 << 20


def endpoint(config: Config) -> Tuple[str, int, bool, str]:
    """berthd's host, port, TLS or not, and path prefix, from its URL."""
    parts = urlsplit(config.url)
    tls = parts.scheme == "https"
    return parts.hostname or "127.0.0.1", parts.port or (443 if tls else 80), tls, \
        parts.path.rstrip("/")


class WsProtocol:
    """One client connection's protocol state: bytes in (feed), bytes out (take_output),
    whole messages out (messages)."""

    def __init__(self, config: Config, req: Request, user_agent: str) -> None:
        host, port, tls, prefix = endpoint(config)
        target = prefix + req.path
        if req.params:
            target += "?" + urlencode(req.params)
        uri = parse_uri(f"{'wss' if tls else 'ws'}://{host}:{port}{target}")
        self.proto = _Protocol(uri, max_size=MAX_MESSAGE)
        request = self.proto.connect()
        request.headers["Authorization"] = f"Bearer {config.api_key}"
        request.headers["User-Agent"] = user_agent
        for k, v in req.headers.items():
            request.headers[k] = v
        self.proto.send_request(request)
        self.response: Any = None
        self.messages: Deque[Tuple[str, bytes]] = deque()
        self.close_received = False
        self._parts: List[bytes] = []
        self._kind = ""

    def take_output(self) -> bytes:
        return b"".join(self.proto.data_to_send())

    def feed(self, data: bytes) -> None:
        """Bytes from the socket (b"" at its end)."""
        if data:
            self.proto.receive_data(data)
        else:
            self.proto.receive_eof()
        for event in self.proto.events_received():
            if self.response is None and hasattr(event, "status_code"):
                self.response = event
                continue
            opcode = getattr(event, "opcode", None)
            if opcode in (Opcode.TEXT, Opcode.BINARY):
                self._kind = "text" if opcode == Opcode.TEXT else "binary"
                self._parts = [bytes(event.data)]
            elif opcode == Opcode.CONT:
                self._parts.append(bytes(event.data))
            elif opcode == Opcode.PONG:
                self.messages.append(("pong", b""))
                continue
            elif opcode == Opcode.CLOSE:
                self.close_received = True
                continue
            else:
                continue
            if event.fin:
                self.messages.append((self._kind, b"".join(self._parts)))
                self._parts = []
        failed = getattr(self.proto, "parser_exc", None)
        if failed is not None and self.response is not None and \
                getattr(self.response, "status_code", 0) == 101 and \
                not isinstance(failed, EOFError):
            raise UnavailableError(f"the WebSocket failed: {failed}", code="unavailable")

    def handshake_reply(self) -> Tuple[int, Dict[str, str], bytes]:
        """The answer to the upgrade: its status, headers (lower-case names) and body."""
        r = self.response
        if r is None:
            raise InternalError("no answer to the WebSocket upgrade", code="internal")
        headers = {k.lower(): v for k, v in r.headers.raw_items()}
        if r.status_code == 101 and getattr(self.proto, "handshake_exc", None) is not None:
            raise InternalError(f"a bad WebSocket upgrade: {self.proto.handshake_exc}",
                                code="internal")
        return int(r.status_code), headers, bytes(r.body or b"")

    def send(self, kind: str, data: bytes) -> bytes:
        """Frames a message; answers the bytes to write."""
        if kind == "text":
            self.proto.send_text(data)
        elif kind == "binary":
            self.proto.send_binary(data)
        elif kind == "ping":
            self.proto.send_ping(data)
        elif kind == "close":
            try:
                self.proto.send_close(1000)
            except Exception:  # noqa: BLE001 - already closing
                pass
        return self.take_output()

    def next_message(self) -> Optional[Tuple[str, bytes]]:
        return self.messages.popleft() if self.messages else None
