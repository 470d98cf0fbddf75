"""The PTY ops: an interactive terminal through GET …/exec/ws (README, "The agent API"): a
JSON start frame with `pty: {cols, rows}` (or ?attach=PID_OR_TAG), binary frames with a
one-byte channel (0 stdin, 1 output), JSON resize, and an `end` event."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Union

from ._core import (STREAM_IDLE_TIMEOUT, WS_PING_INTERVAL, Abort, Adopt, Close, CoreBase,
                    Deadline, Op, Request, StopToken, WsRecv, WsSend, _int_field, _maybe_await)
from .errors import (BerthError, InternalError, InvalidArgumentError, TimeoutError,
                     UnavailableError, error_from_answer)
from .types import CommandResult, Json

#: The agent's bounds on a terminal's size.
MAX_PTY_SIDE = 10000
DataCallback = Callable[[bytes], Any]


@dataclass
class PtySession:
    """An open terminal WebSocket: what the handle's calls send on."""
    ws: str
    handle: Any
    pid: int
    tag: Optional[str]
    token: StopToken


def check_size(cols: int, rows: int) -> None:
    if not (isinstance(cols, int) and isinstance(rows, int) and 1 <= cols <= MAX_PTY_SIDE
            and 1 <= rows <= MAX_PTY_SIDE):
        raise InvalidArgumentError(f"a terminal is 1-{MAX_PTY_SIDE} columns and rows, not "
                                   f"{cols}x{rows}", code="invalid_argument")


class PtyOps(CoreBase):

    def pty_start_body(self, cols: int, rows: int, cmd: Union[None, str, Sequence[str]],
                       cwd: Optional[str], user: Optional[str], env: Optional[Dict[str, str]],
                       tag: Optional[str]) -> Json:
        check_size(cols, rows)
        body: Json = {"type": "start", "pty": {"cols": cols, "rows": rows}}
        if cmd is not None:
            body["cmd"] = cmd if isinstance(cmd, str) else list(cmd)
        if cwd:
            body["cwd"] = cwd
        if user:
            body["user"] = user
        if env:
            body["env"] = dict(env)
        if tag:
            body["tag"] = tag
        return body

    def pty_open(self, ws: str, start: Optional[Json], attach: Optional[str],
                 deadline: Deadline) -> Op[PtySession]:
        """Opens the WebSocket, starts the terminal (or attaches to `attach`) and waits for
        the agent's `started` / `attached`. The session stays open for pty_follow to adopt."""
        what = f"terminal {attach} in {ws}" if attach else f"terminal in {ws}"
        req = Request("GET", self.ws_path(ws, "/exec/ws"), what,
                      params=[("attach", attach)] if attach else [], websocket=True,
                      replayable=True)
        reply = yield from self.send(req, deadline)
        h = reply.handle
        try:
            if start is not None:
                yield WsSend(h, "text", json.dumps(start).encode())
            while True:
                kind, data = yield WsRecv(h, deadline.cut(STREAM_IDLE_TIMEOUT))
                if kind == "idle":
                    raise TimeoutError(f"{what}: the agent did not answer the start",
                                       code="deadline_exceeded")
                if kind in ("close", "aborted"):
                    raise UnavailableError(f"{what}: closed before it started",
                                           code="unavailable")
                if kind != "text":
                    continue
                try:
                    ev = json.loads(data)
                except ValueError:
                    raise InternalError(f"{what}: the agent's answer is not JSON",
                                        code="internal") from None
                if not isinstance(ev, dict):
                    continue
                if ev.get("type") == "error":
                    raise error_from_answer(0, ev, what)
                if ev.get("type") in ("started", "attached"):
                    tag = ev.get("tag")
                    return PtySession(ws, h, _int_field(ev, "pid", 0),
                                      tag if isinstance(tag, str) else None, StopToken())
        except BerthError:
            yield Close(h)
            raise

    def pty_follow(self, s: PtySession, on_data: Optional[DataCallback]) -> Op[CommandResult]:
        """Reads the terminal's output to its end: each piece to `on_data` as bytes. A link
        quiet for WS_PING_INTERVAL is pinged; nothing back for STREAM_IDLE_TIMEOUT means it is
        dead. The WebSocket breaking (the workspace stopped) is an UnavailableError; a
        disconnect() ends it with a BerthError saying the process runs on."""
        yield Adopt(s.handle)
        what = f"terminal {s.pid} in {s.ws}"
        last = time.monotonic()
        while True:
            try:
                kind, data = yield WsRecv(s.handle, WS_PING_INTERVAL)
            except UnavailableError as e:
                if s.token.stopped:
                    kind, data = "aborted", b""
                else:
                    raise UnavailableError(f"{what}: the stream broke (did the workspace stop?): "
                                           f"{e.message}", code="unavailable") from None
            if kind == "aborted":
                raise BerthError(f"{what}: disconnected; the process runs on (reattach with "
                                 f"pty.connect({s.pid}))", code="cancelled")
            if kind == "idle":
                if time.monotonic() - last > STREAM_IDLE_TIMEOUT:
                    raise TimeoutError(f"{what}: no answer to pings for {STREAM_IDLE_TIMEOUT:g} "
                                       "s: berthd or the workspace is gone",
                                       code="deadline_exceeded")
                yield WsSend(s.handle, "ping", b"")
                continue
            last = time.monotonic()
            if kind == "binary":
                if len(data) > 1 and data[0] in (1, 2) and on_data is not None:
                    yield from _maybe_await(on_data(data[1:]))
                continue
            if kind == "close":
                raise UnavailableError(f"{what}: the stream closed before the process ended "
                                       "(did the workspace stop?)", code="unavailable")
            if kind != "text":
                continue
            try:
                ev = json.loads(data)
            except ValueError:
                continue
            if isinstance(ev, dict) and ev.get("type") == "end":
                signal = ev.get("signal")
                return CommandResult(exit_code=_int_field(ev, "exit_code", -1), stdout="",
                                     stderr="", signal=signal if isinstance(signal, str) else None,
                                     timed_out=ev.get("timed_out") is True, pid=s.pid,
                                     duration_ms=_int_field(ev, "duration_ms", 0))
            # {"type":"error"} answers a control message the agent could not apply (a resize
            # of a process that just ended): nothing to wait for, the end comes anyway.

    def pty_send(self, s: PtySession, data: Union[str, bytes]) -> Op[None]:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if raw:
            yield WsSend(s.handle, "binary", b"\x00" + raw)

    def pty_resize(self, s: PtySession, cols: int, rows: int) -> Op[None]:
        check_size(cols, rows)
        yield WsSend(s.handle, "text",
                     json.dumps({"type": "resize", "cols": cols, "rows": rows}).encode())

    def pty_disconnect(self, s: PtySession) -> Op[None]:
        s.token.stopped = True
        yield Abort(s.handle)
