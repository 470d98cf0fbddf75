"""The command ops: exec streams, background processes (the agent's API through berthd)."""

from __future__ import annotations

import base64
import codecs
from typing import Any, Dict, List, Optional, Sequence, Union
from urllib.parse import quote

from ._core import (STREAM_IDLE_TIMEOUT, Callback, CoreBase, Deadline, LineSplitter, Op, Request,
                    _int_field, _maybe_await)
from .errors import (BerthError, InvalidArgumentError, NotFoundError, UnavailableError,
                     error_from_answer)
from .types import CommandResult, Json, ProcessInfo


class CommandOps(CoreBase):

    def exec_body(self, cmd: Union[str, Sequence[str]], timeout: Optional[float],
                  cwd: Optional[str], user: Optional[str], env: Optional[Dict[str, str]],
                  stdin: Union[None, str, bytes], tag: Optional[str], background: bool) -> Json:
        body: Json = {"cmd": cmd if isinstance(cmd, str) else list(cmd)}
        if env:
            body["env"] = dict(env)
        if cwd:
            body["cwd"] = cwd
        if user:
            body["user"] = user
        if stdin is not None:
            try:  # the agent takes stdin as a JSON string
                body["stdin"] = stdin.decode("utf-8") if isinstance(stdin, bytes) else stdin
            except UnicodeDecodeError:
                raise InvalidArgumentError(
                    "stdin= must be UTF-8 text; send other bytes to a background command "
                    "with send_stdin()", code="invalid_argument") from None
        if timeout:
            body["timeout_ms"] = int(timeout * 1000)
        if tag:
            body["tag"] = tag
        if background:
            body["background"] = True
        return body

    def run(self, ws: str, body: Json, on_stdout: Optional[Callback],
            on_stderr: Optional[Callback], deadline: Deadline) -> Op[CommandResult]:
        """Runs a command to its end. Always through the NDJSON stream, callbacks or not: its
        keepalives tell a live command from a dead connection (the plain answer says nothing
        until the end), and output arrives as exact bytes. Not sent again on its own: the
        command may have run."""
        req = Request("POST", self.ws_path(ws, "/exec"), f"exec in {ws}", json=body,
                      headers={"Accept": "application/x-ndjson"}, stream=True)
        reply = yield from self.send(req, deadline, STREAM_IDLE_TIMEOUT)
        return (yield from self.follow(reply.handle, deadline, on_stdout, on_stderr,
                                       f"exec in {ws}"))

    def start_background(self, ws: str, body: Json, deadline: Deadline) -> Op[Json]:
        j = yield from self.call(Request("POST", self.ws_path(ws, "/exec"), f"exec in {ws}",
                                         json=body), deadline)
        return j if isinstance(j, dict) else {}

    def follow(self, handle: Any, deadline: Deadline, on_stdout: Optional[Callback],
               on_stderr: Optional[Callback], what: str) -> Op[CommandResult]:
        """Reads exec events (start, stdout, stderr, keepalive, end) to the end; output goes to
        the callbacks as it comes, decoded as UTF-8 without splitting a character."""
        out: Dict[str, List[str]] = {"stdout": [], "stderr": []}
        decoders = {k: codecs.getincrementaldecoder("utf-8")("replace") for k in out}
        callbacks = {"stdout": on_stdout, "stderr": on_stderr}
        splitter = LineSplitter(what)
        pid = 0
        # The handle is closed by the driver when the op ends, however it ends (a generator
        # cannot yield while it is being closed).
        while True:
            data = yield from self.read(handle, deadline, STREAM_IDLE_TIMEOUT, what)
            if not data:
                raise UnavailableError(f"{what}: the stream ended before the command did "
                                       "(the workspace stopped, or berthd went away)",
                                       code="unavailable")
            for ev in splitter.feed(data):
                kind = ev.get("type")
                if kind in ("start", "attached"):
                    pid = _int_field(ev, "pid", pid)
                elif kind in ("stdout", "stderr"):
                    if isinstance(ev.get("data"), str):
                        raw = ev["data"].encode("utf-8")
                    elif isinstance(ev.get("data_b64"), str):
                        raw = base64.b64decode(ev["data_b64"])
                    else:
                        continue
                    text = decoders[kind].decode(raw)
                    if text:
                        out[kind].append(text)
                        cb = callbacks[kind]
                        if cb is not None:
                            yield from _maybe_await(cb(text))
                elif kind == "end":
                    for k, dec in decoders.items():
                        tail = dec.decode(b"", final=True)
                        if tail:
                            out[k].append(tail)
                            cb = callbacks[k]
                            if cb is not None:
                                yield from _maybe_await(cb(tail))
                    signal = ev.get("signal")
                    result = CommandResult(
                        exit_code=_int_field(ev, "exit_code", -1),
                        stdout="".join(out["stdout"]), stderr="".join(out["stderr"]),
                        signal=signal if isinstance(signal, str) else None,
                        timed_out=ev.get("timed_out") is True, pid=pid,
                        duration_ms=_int_field(ev, "duration_ms", 0))
                    # berthd ends the stream right after `end` (the chunked body's last
                    # bytes). Reading them hands the keep-alive connection back to the pool;
                    # closing the answer before them would close the connection, and the next
                    # call would pay for a new one (measured: ~1.7 ms of a 5 ms exec).
                    try:
                        while (yield from self.read(handle, deadline, STREAM_IDLE_TIMEOUT,
                                                    what)):
                            pass
                    except BerthError:
                        pass  # the result stands: the stream broke only after its end
                    return result
                elif kind == "error":
                    raise error_from_answer(0, ev, what)

    def process_output(self, ws: str, pid_or_tag: str, on_stdout: Optional[Callback],
                       on_stderr: Optional[Callback], deadline: Deadline) -> Op[CommandResult]:
        """A background process's whole output (the agent's buffer, then live) to its end."""
        path = self.ws_path(ws, f"/processes/{quote(str(pid_or_tag), safe='')}/output")
        req = Request("GET", path, f"output of process {pid_or_tag} in {ws}",
                      params=[("follow", "1")], stream=True, replayable=True)
        reply = yield from self.send(req, deadline, STREAM_IDLE_TIMEOUT)
        return (yield from self.follow(reply.handle, deadline, on_stdout, on_stderr, req.what))

    def processes(self, ws: str, deadline: Deadline) -> Op[List[ProcessInfo]]:
        j = yield from self.call(Request("GET", self.ws_path(ws, "/processes"),
                                         f"list processes in {ws}", replayable=True), deadline)
        return [ProcessInfo.from_json(p) for p in j.get("processes", []) if isinstance(p, dict)]

    def process(self, ws: str, pid_or_tag: str, deadline: Deadline) -> Op[ProcessInfo]:
        j = yield from self.call(Request(
            "GET", self.ws_path(ws, f"/processes/{quote(str(pid_or_tag), safe='')}"),
            f"process {pid_or_tag} in {ws}", replayable=True), deadline)
        return ProcessInfo.from_json(j)

    def kill(self, ws: str, pid_or_tag: str, deadline: Deadline) -> Op[bool]:
        try:
            yield from self.call(Request(
                "DELETE", self.ws_path(ws, f"/processes/{quote(str(pid_or_tag), safe='')}"),
                f"kill process {pid_or_tag} in {ws}", replayable=True), deadline)
        except NotFoundError:
            return False
        return True

    def send_stdin(self, ws: str, pid_or_tag: str, data: Union[str, bytes], close: bool,
                   deadline: Deadline) -> Op[None]:
        yield from self.call(Request(
            "POST", self.ws_path(ws, f"/processes/{quote(str(pid_or_tag), safe='')}/stdin"),
            f"stdin of process {pid_or_tag} in {ws}", params=[("close", "1")] if close else [],
            content=data.encode("utf-8") if isinstance(data, str) else bytes(data)), deadline)
