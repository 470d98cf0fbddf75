"""The SDK's one implementation, sans-IO: every call is a generator ("an op") that yields
effects (send this request, read from that stream, sleep, run this blocking function, hand
this value to the caller's iterator) and gets their results sent back. Two small drivers
perform them: _sync.py with httpx.Client, _async.py with httpx.AsyncClient.

Why this shape rather than an async core behind a sync facade (an event loop on a helper
thread): the sync client then needs no thread and no loop of its own, so it works inside a
program that already runs one (Jupyter, an async agent framework) and its callbacks run on
the caller's thread; the async client cancels cleanly (CancelledError lands in the op at its
current effect); and the logic that matters (deadlines, Retry-After, waking, paging, NDJSON
streams, error mapping) exists once, tested through both drivers. Only the public classes
are written twice, as one-line delegations with the same names and signatures.

Deadlines: every op gets a Deadline; each request's timeouts are cut to what is left of it,
and a stream read waits at most the stream's idle limit (berthd and the agent send a
keepalive line every 15 s on every stream, so silence means the far end is gone)."""

from __future__ import annotations

import codecs
import base64
import inspect
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import (Any, Awaitable, Callable, Dict, Generator, Iterable, List, Optional,
                    Sequence, Tuple, TypeVar, Union)
from urllib.parse import quote, urlsplit

from .errors import (AlreadyExistsError, BerthError, CommandExitError, ConflictError,
                     InternalError, InvalidArgumentError, NotFoundError, AuthError,
                     TimeoutError, UnavailableError, error_from_answer)
from .types import CommandResult, EntryInfo, Json, Preview, ProcessInfo, WorkspaceInfo

T = TypeVar("T")
Op = Generator["Effect", Any, T]

#: How long a call may take in all, unless its `request_timeout` says otherwise (seconds).
DEFAULT_REQUEST_TIMEOUT = 60.0
#: How long create/connect/start/stop/hibernate wait for the workspace to get there: a boot
#: under TCG on a busy host takes minutes (seconds with KVM).
DEFAULT_WAIT_TIMEOUT = 300.0
#: How long `commands.run` runs a command before the agent kills it (seconds), as E2B's 60 s.
DEFAULT_COMMAND_TIMEOUT = 60.0
#: What the client adds to a command's `timeout` to wait for its end (the agent kills it at
#: `timeout`; the answer still has to arrive).
COMMAND_GRACE = 30.0
#: A stream with no byte for this long is dead: three of the 15 s keepalives missed.
STREAM_IDLE_TIMEOUT = 45.0
#: Connecting to berthd (loopback or LAN): a refusal is immediate, a black hole is not.
CONNECT_TIMEOUT = 10.0
#: Upload and download chunks: large enough for throughput, small enough to stay flat.
CHUNK = 256 * 1024
#: berthd's default address (scripts/run), used when neither url= nor BERTH_URL is given.
DEFAULT_URL = "http://127.0.0.1:8420"

Callback = Callable[[str], Union[None, Awaitable[None]]]


class Deadline:
    """A point in time.monotonic() by which a call ends; None: no deadline (streams that last
    as long as the caller wants still have their idle limit)."""

    def __init__(self, seconds: Optional[float]) -> None:
        self.seconds = seconds
        self.at = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> Optional[float]:
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0

    def allows(self, wait: float) -> bool:
        """Whether there is room for `wait` and a little more for the call itself."""
        left = self.remaining()
        return left is None or left > wait + 0.1

    def cut(self, step: float) -> float:
        left = self.remaining()
        return step if left is None else max(0.001, min(step, left))


# --- effects ---------------------------------------------------------------------------------

@dataclass
class Timeouts:
    connect: float
    read: float
    write: float


class UploadBody:
    """A request body streamed from a file object or an iterable of bytes, never read whole.
    A seekable file can be sent again (a retry starts from where it started); an iterator
    cannot."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.length: Optional[int] = None
        self.start: Optional[int] = None
        self.used = False
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.length = len(source)
        elif hasattr(source, "read"):
            try:
                if source.seekable():
                    self.start = source.tell()
                    end = source.seek(0, os.SEEK_END)
                    source.seek(self.start)
                    self.length = end - self.start
            except (AttributeError, OSError, ValueError):
                self.start = None

    def rewind(self) -> bool:
        """Makes the body ready to be sent (again); False when it cannot be sent again."""
        if not self.used:
            self.used = True
            return True
        if isinstance(self.source, (bytes, bytearray, memoryview)):
            return True
        if self.start is not None:
            self.source.seek(self.start)
            return True
        return False


@dataclass
class Request:
    method: str
    path: str
    what: str  # names the call in errors: "POST /v1/workspaces"
    params: List[Tuple[str, str]] = field(default_factory=list)
    json: Any = None
    content: Optional[bytes] = None
    body: Optional[UploadBody] = None
    headers: Dict[str, str] = field(default_factory=dict)
    # May the SDK send it again on its own (idempotent, or carrying an Idempotency-Key)?
    replayable: bool = False
    stream: bool = False  # the answer's body is read by the op (Read effects), not whole


@dataclass
class Send:
    """Performs one HTTP exchange. Answers a Reply: with `stream`, a 2xx answer comes with a
    handle to Read from and Close; any other answer (and every non-stream one) comes whole."""
    request: Request
    timeouts: Timeouts


@dataclass
class Reply:
    status: int
    headers: Dict[str, str]
    data: bytes
    handle: Any = None


@dataclass
class Read:
    """The next bytes of a streamed answer; b"" at its end."""
    handle: Any


@dataclass
class Close:
    handle: Any


@dataclass
class Sleep:
    seconds: float


@dataclass
class Blocking:
    """A blocking local call (a file object's write); the async driver runs it on a thread."""
    fn: Callable[..., Any]
    args: Tuple[Any, ...]


@dataclass
class Await:
    """An awaitable a caller's callback returned (async client only)."""
    awaitable: Any


@dataclass
class Emit:
    """A value for the caller's iterator (list pages, download chunks)."""
    value: Any


Effect = Union[Send, Read, Close, Sleep, Blocking, Await, Emit]


# --- helpers ---------------------------------------------------------------------------------

def retry_after(value: Optional[str]) -> Optional[float]:
    """Retry-After as delta seconds, clamped to 0.1-5 s (a longer one is waited out in steps,
    asking again each time, as common/client does); None for a date or garbage."""
    if value is None:
        return None
    value = value.strip()
    if not value.isdigit() or len(value) > 6:
        return None
    return min(max(float(value), 0.1), 5.0)


def parse_json(data: bytes, what: str) -> Any:
    if not data.strip():
        return {}
    try:
        return json.loads(data)
    except ValueError as e:
        raise InternalError(f"{what}: berthd's answer is not JSON: {e}") from None


def file_path(path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise InvalidArgumentError(f"paths in a workspace are absolute: {path!r}",
                                   code="invalid_argument")
    return quote(path, safe="/")


class LineSplitter:
    """NDJSON: bytes in, parsed lines out; a line over `limit` is an error, not a memory hog."""

    def __init__(self, what: str, limit: int = 64 << 20) -> None:
        self.what, self.limit, self.pending = what, limit, b""

    def feed(self, data: bytes) -> List[Json]:
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        if len(self.pending) > self.limit:
            raise InternalError(f"{self.what}: an NDJSON line over {self.limit} bytes")
        out = []
        for line in lines:
            if line.strip():
                parsed = parse_json(line, self.what)
                if isinstance(parsed, dict):
                    out.append(parsed)
        return out


@dataclass
class Config:
    url: str
    api_key: str
    request_timeout: float


def resolve_config(url: Optional[str], api_key: Optional[str],
                   request_timeout: Optional[float]) -> Config:
    """Arguments first, then BERTH_URL / BERTH_API_KEY (as the CLI), then berthd's default
    address."""
    url = url or os.environ.get("BERTH_URL") or DEFAULT_URL
    key = api_key or os.environ.get("BERTH_API_KEY")
    if not key:
        raise AuthError("no API key: pass api_key= or set BERTH_API_KEY", code="unauthenticated")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidArgumentError(f"berthd's URL must be http(s)://host[:port]: {url!r}",
                                   code="invalid_argument")
    return Config(url=url.rstrip("/"), api_key=key,
                  request_timeout=DEFAULT_REQUEST_TIMEOUT if request_timeout is None
                  else request_timeout)


def _int_field(j: Json, key: str, default: int) -> int:
    v = j.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _maybe_await(result: Any) -> Op[None]:
    if inspect.isawaitable(result):
        yield Await(result)


# --- the ops ---------------------------------------------------------------------------------

class Core:
    """Builds and interprets berthd's requests; holds configuration only (no I/O, no state
    that a call changes), so any number of calls may run at once."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def deadline(self, request_timeout: Optional[float], default: Optional[float] = None) -> Deadline:
        if request_timeout is not None:
            return Deadline(request_timeout)
        return Deadline(self.config.request_timeout if default is None else default)

    @staticmethod
    def ws_path(ws: str, rest: str = "") -> str:
        return f"/v1/workspaces/{quote(ws, safe='')}{rest}"

    # -- requests ----------------------------------------------------------------------------

    def send(self, req: Request, deadline: Deadline, idle: Optional[float] = None) -> Op[Reply]:
        """One request with the SDK's retries: a 503 or 429 with Retry-After is waited out and
        the request sent again, and a connection that failed before an answer is tried again
        (twice), but only for a replayable request and while the deadline leaves room. Any
        other non-2xx answer raises its typed error."""
        failures = 0
        while True:
            if req.body is not None and not req.body.rewind():
                req.replayable = False
            left = deadline.remaining()
            if left is not None and left <= 0:
                raise TimeoutError(f"{req.what}: request_timeout ({deadline.seconds:g} s) ran out",
                                   code="deadline_exceeded")
            # The answer's header may rightly take all that is left (berthd holds POST …/wait
            # and requests that wake a workspace); a stream's reads take at most `idle`.
            read = deadline.cut(idle) if (req.stream and idle) else (left if left is not None
                                                                     else STREAM_IDLE_TIMEOUT)
            timeouts = Timeouts(connect=deadline.cut(CONNECT_TIMEOUT), read=read,
                                write=deadline.cut(STREAM_IDLE_TIMEOUT))
            try:
                reply: Reply = yield Send(req, timeouts)
            except UnavailableError as e:
                if (e.status is None and req.replayable and failures < 2
                        and deadline.allows(0.25 * (failures + 1))):
                    failures += 1
                    yield Sleep(0.25 * failures)
                    continue
                raise
            except TimeoutError as e:
                if e.status is None:
                    raise TimeoutError(
                        f"{req.what}: " + ("request_timeout "
                                           f"({deadline.seconds:g} s) ran out" if deadline.expired()
                                           else "no answer in time"),
                        code="deadline_exceeded") from None
                raise
            if 200 <= reply.status < 300:
                return reply
            if reply.status in (429, 503) and req.replayable:
                delay = retry_after(reply.headers.get("retry-after"))
                if delay is not None and deadline.allows(delay):
                    yield Sleep(delay)
                    continue
            try:
                body: Any = json.loads(reply.data) if reply.data else ""
            except ValueError:
                body = reply.data.decode("utf-8", "replace")
            raise error_from_answer(reply.status, body, req.what)

    def call(self, req: Request, deadline: Deadline) -> Op[Any]:
        """A request with a JSON answer (or none)."""
        reply = yield from self.send(req, deadline)
        return parse_json(reply.data, req.what)

    def read(self, handle: Any, deadline: Deadline, idle: float, what: str) -> Op[bytes]:
        if deadline.expired():
            raise TimeoutError(f"{what}: request_timeout ({deadline.seconds:g} s) ran out",
                               code="deadline_exceeded")
        try:
            data: bytes = yield Read(handle)
        except TimeoutError:
            if deadline.expired():
                raise TimeoutError(f"{what}: request_timeout ({deadline.seconds:g} s) ran out",
                                   code="deadline_exceeded") from None
            raise TimeoutError(f"{what}: nothing from berthd for {idle:g} s (the stream's idle "
                               "limit; keepalives come every 15 s): berthd or the workspace is "
                               "gone", code="deadline_exceeded") from None
        except UnavailableError as e:
            raise UnavailableError(f"{what}: the stream broke: {e.message}",
                                   code="unavailable") from None
        return data

    # -- workspaces --------------------------------------------------------------------------

    def get(self, ws: str, deadline: Deadline) -> Op[WorkspaceInfo]:
        j = yield from self.call(Request("GET", self.ws_path(ws), f"GET workspace {ws}",
                                         replayable=True), deadline)
        return WorkspaceInfo.from_json(j)

    def create(self, body: Json, wait: bool, deadline: Deadline) -> Op[WorkspaceInfo]:
        # One key per create: a retry (ours after a broken connection, or berthd's 503)
        # answers the workspace the first attempt made, never a second one.
        req = Request("POST", "/v1/workspaces", "create workspace", json=body,
                      headers={"Idempotency-Key": "sdk-" + uuid.uuid4().hex}, replayable=True)
        j = yield from self.call(req, deadline)
        info = WorkspaceInfo.from_json(j)
        if wait and info.state != "running":
            info = yield from self.wait_state(info.id, "running", deadline)
        return info

    def wait_state(self, ws: str, state: str, deadline: Deadline) -> Op[WorkspaceInfo]:
        """berthd's POST …/wait (held by berthd until the state, no polling), asked again when
        berthd's own timeout runs out first. ConflictError when the workspace settles
        elsewhere (error, or stopped while waiting for running)."""
        while True:
            left = deadline.remaining()
            seconds = 3600 if left is None else min(3600, int(left - 1) if left >= 2 else
                                                    (1 if left >= 1 else 0))
            try:
                j = yield from self.call(
                    Request("POST", self.ws_path(ws, "/wait"), f"wait for {ws} to be {state}",
                            json={"state": state, "timeout_s": seconds}, replayable=True),
                    deadline)
                return WorkspaceInfo.from_json(j)
            except TimeoutError:
                if seconds > 0 and not deadline.expired():
                    continue
                raise TimeoutError(f"workspace {ws!r} did not become {state} within "
                                   f"{deadline.seconds:g} s", code="deadline_exceeded") from None

    def ensure_running(self, ws: str, deadline: Deadline) -> Op[WorkspaceInfo]:
        """Wakes a workspace: a booting one is waited for, a stopped or hibernated one
        started (unless its auto_start is off: ConflictError)."""
        info = yield from self.get(ws, deadline)
        state = info.state
        if state == "running":
            return info
        if state in ("stopping", "hibernating"):
            info = yield from self.wait_state(
                info.id, "stopped" if state == "stopping" else "hibernated", deadline)
            state = info.state
        if state in ("stopped", "hibernated"):
            if not info.auto_start:
                raise ConflictError(f"{info.name} is {state} and its auto_start is off: "
                                    "start() it", code="failed_precondition")
            info = yield from self.action(info.id, "start", None, deadline)
        elif state not in ("creating", "starting", "running"):
            raise ConflictError(f"{info.name} is {state}" + (f": {info.error}" if info.error
                                                            else ""),
                                code="failed_precondition")
        if info.state == "running":
            return info
        return (yield from self.wait_state(info.id, "running", deadline))

    def get_or_create(self, name: str, body: Json, wait: bool,
                      deadline: Deadline) -> Op[WorkspaceInfo]:
        try:
            info = yield from self.get(name, deadline)
        except NotFoundError:
            try:
                return (yield from self.create(body, wait, deadline))
            except AlreadyExistsError:
                pass  # made by someone else meanwhile
        if not wait:
            return (yield from self.get(name, deadline))
        return (yield from self.ensure_running(name, deadline))

    def action(self, ws: str, name: str, body: Optional[Json],
               deadline: Deadline) -> Op[WorkspaceInfo]:
        # start/stop/hibernate are idempotent in berthd (asking for the state a workspace is
        # in does nothing), so they may be sent again.
        j = yield from self.call(Request("POST", self.ws_path(ws, "/" + name), f"{name} {ws}",
                                         json=body or {}, replayable=True), deadline)
        return WorkspaceInfo.from_json(j)

    def lifecycle(self, ws: str, name: str, body: Optional[Json], settle: Optional[str],
                  deadline: Deadline) -> Op[WorkspaceInfo]:
        info = yield from self.action(ws, name, body, deadline)
        if settle and info.state != settle:
            info = yield from self.wait_state(info.id, settle, deadline)
        return info

    def delete(self, ws: str, wait: bool, deadline: Deadline) -> Op[None]:
        j = yield from self.call(Request("DELETE", self.ws_path(ws), f"delete {ws}",
                                         replayable=True), deadline)
        if not wait:
            return
        ws_id = j.get("id", ws) if isinstance(j, dict) else ws
        # Nothing to POST …/wait for (a deleted workspace has no state): ask until GET is a
        # 404, every 250 ms and then less often, as common/client does.
        pause = 0.25
        while True:
            try:
                info = yield from self.get(ws_id, deadline)
            except NotFoundError:
                return
            if info.state != "deleting":
                raise ConflictError(f"{ws} is {info.state} again instead of being deleted",
                                    code="failed_precondition")
            if not deadline.allows(pause):
                raise TimeoutError(f"{ws} is still being deleted", code="deadline_exceeded")
            yield Sleep(pause)
            pause = min(pause * 2, 2.0)

    def patch(self, ws: str, body: Json, deadline: Deadline) -> Op[WorkspaceInfo]:
        j = yield from self.call(Request("PATCH", self.ws_path(ws), f"update {ws}", json=body,
                                         replayable=True), deadline)
        return WorkspaceInfo.from_json(j)

    def list(self, state: Optional[str], label: Union[None, str, Dict[str, str]],
             page_timeout: Optional[float], page_size: int = 100) -> Op[None]:
        """Emits every matching WorkspaceInfo, page after page (in id order); each page has
        its own deadline, so a slow consumer does not run the listing out of time."""
        labels: List[str] = []
        if isinstance(label, str):
            labels = [label]
        elif isinstance(label, dict):
            labels = [f"{k}={v}" for k, v in label.items()]
        after: Optional[str] = None
        while True:
            params = [("limit", str(page_size))]
            if state:
                params.append(("state", state))
            params += [("label", x) for x in labels]
            if after:
                params.append(("after", after))
            j = yield from self.call(Request("GET", "/v1/workspaces", "list workspaces",
                                             params=params, replayable=True),
                                     self.deadline(page_timeout))
            for w in j.get("workspaces", []):
                yield Emit(WorkspaceInfo.from_json(w))
            nxt = j.get("next")
            if not isinstance(nxt, str) or not nxt:
                return
            if after is not None and nxt <= after:
                raise InternalError(f"list workspaces: berthd's next page ({nxt}) does not "
                                    "move forward")
            after = nxt

    # -- commands ----------------------------------------------------------------------------

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
            body["stdin"] = stdin.decode("utf-8") if isinstance(stdin, bytes) else stdin
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
                    return CommandResult(
                        exit_code=_int_field(ev, "exit_code", -1),
                        stdout="".join(out["stdout"]), stderr="".join(out["stderr"]),
                        signal=signal if isinstance(signal, str) else None,
                        timed_out=ev.get("timed_out") is True, pid=pid,
                        duration_ms=_int_field(ev, "duration_ms", 0))
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

    # -- files -------------------------------------------------------------------------------

    def _file_req(self, method: str, ws: str, path: str, what: str, user: Optional[str],
                  params: Optional[List[Tuple[str, str]]] = None, **kw: Any) -> Request:
        ps = list(params or [])
        if user:
            ps.append(("user", user))
        return Request(method, self.ws_path(ws, "/files" + file_path(path)), f"{what} {path}",
                       params=ps, **kw)

    def read_file(self, ws: str, path: str, user: Optional[str], deadline: Deadline) -> Op[bytes]:
        reply = yield from self.send(self._file_req("GET", ws, path, "read", user,
                                                    replayable=True), deadline)
        return reply.data

    def stat(self, ws: str, path: str, user: Optional[str], deadline: Deadline) -> Op[EntryInfo]:
        j = yield from self.call(self._file_req("GET", ws, path, "stat", user, [("stat", "1")],
                                                replayable=True), deadline)
        return EntryInfo.from_json(j)

    def exists(self, ws: str, path: str, user: Optional[str], deadline: Deadline) -> Op[bool]:
        try:
            yield from self.stat(ws, path, user, deadline)
        except NotFoundError:
            return False
        return True

    def list_dir(self, ws: str, path: str, user: Optional[str],
                 deadline: Deadline) -> Op[List[EntryInfo]]:
        j = yield from self.call(self._file_req("GET", ws, path, "list", user, replayable=True),
                                 deadline)
        if not isinstance(j, dict) or not isinstance(j.get("entries"), list):
            raise InvalidArgumentError(f"{path} is not a directory", code="invalid_argument")
        return [EntryInfo.from_json(e) for e in j["entries"] if isinstance(e, dict)]

    def upload(self, ws: str, path: str, source: Any, user: Optional[str], mode: Optional[int],
               deadline: Deadline) -> Op[EntryInfo]:
        """PUT, streamed: Content-Length when the size is known (bytes, a seekable file),
        chunked otherwise. The agent writes a temporary file and renames it into place, so a
        PUT may be sent again (a seekable file is rewound)."""
        params = [("mode", format(mode, "04o"))] if mode is not None else []
        body = UploadBody(source)
        headers = {"Content-Type": "application/octet-stream"}
        if body.length is not None:
            headers["Content-Length"] = str(body.length)
        req = self._file_req("PUT", ws, path, "upload", user, params, body=body, headers=headers,
                             replayable=True)
        reply = yield from self.send(req, deadline)
        return EntryInfo.from_json(parse_json(reply.data, req.what))

    def download(self, ws: str, path: str, user: Optional[str], sink: Any, deadline: Deadline,
                 idle: float = STREAM_IDLE_TIMEOUT) -> Op[int]:
        """GET, streamed: each chunk is emitted (sink None) or written to `sink`. The bytes."""
        req = self._file_req("GET", ws, path, "download", user, stream=True, replayable=True)
        reply = yield from self.send(req, deadline, idle)
        total = 0
        while True:
            chunk = yield from self.read(reply.handle, deadline, idle, req.what)
            if not chunk:
                yield Close(reply.handle)
                return total
            total += len(chunk)
            if sink is None:
                yield Emit(chunk)
            else:
                yield Blocking(sink.write, (chunk,))

    def remove(self, ws: str, path: str, recursive: bool, user: Optional[str],
               deadline: Deadline) -> Op[None]:
        yield from self.call(self._file_req("DELETE", ws, path, "remove", user,
                                            [("recursive", "1")] if recursive else [],
                                            replayable=True), deadline)

    def rename(self, ws: str, old: str, new: str, user: Optional[str],
               deadline: Deadline) -> Op[EntryInfo]:
        file_path(new)
        j = yield from self.call(self._file_req("POST", ws, old, "rename", user,
                                                [("op", "move"), ("to", new)]), deadline)
        return EntryInfo.from_json(j)

    def make_dir(self, ws: str, path: str, user: Optional[str], deadline: Deadline) -> Op[bool]:
        reply = yield from self.send(self._file_req("POST", ws, path, "make_dir", user,
                                                    [("op", "mkdir"), ("parents", "1")],
                                                    replayable=True), deadline)
        return reply.status == 201

    # -- previews ----------------------------------------------------------------------------

    def create_preview(self, ws: str, port: int, public: bool,
                       expires_in: Union[None, int, str], deadline: Deadline) -> Op[Preview]:
        body: Json = {"port": port, "public": public}
        if expires_in is not None:
            body["expires_in"] = expires_in
        j = yield from self.call(Request("POST", self.ws_path(ws, "/previews"),
                                         f"preview of port {port} in {ws}", json=body), deadline)
        return Preview.from_json(j)

    def previews(self, ws: str, deadline: Deadline) -> Op[List[Preview]]:
        j = yield from self.call(Request("GET", self.ws_path(ws, "/previews"),
                                         f"previews of {ws}", replayable=True), deadline)
        return [Preview.from_json(p) for p in j.get("previews", []) if isinstance(p, dict)]

    def revoke_preview(self, ws: str, preview_id: str, deadline: Deadline) -> Op[Preview]:
        j = yield from self.call(Request(
            "DELETE", self.ws_path(ws, f"/previews/{quote(preview_id, safe='')}"),
            f"revoke preview {preview_id} of {ws}", replayable=True), deadline)
        return Preview.from_json(j)

    def get_host(self, ws: str, port: int, deadline: Deadline) -> Op[str]:
        """The preview host of `port` ("5173-web.preview.localhost:8420"), once something
        listens on it: berthd names it in GET …/ports. A server is usually started just before
        this is asked, so it is waited for (asking every 100 ms, then less often) rather than
        handed out before it can answer."""
        pause = 0.1
        while True:
            j = yield from self.call(Request("GET", self.ws_path(ws, "/ports"), f"ports of {ws}",
                                             replayable=True), deadline)
            for p in j.get("ports", []):
                if isinstance(p, dict) and p.get("port") == port and isinstance(
                        p.get("preview_url"), str):
                    return urlsplit(p["preview_url"]).netloc
            if not deadline.allows(pause):
                raise TimeoutError(f"nothing listens on port {port} in {ws} after "
                                   f"{deadline.seconds:g} s", code="deadline_exceeded")
            yield Sleep(pause)
            pause = min(pause * 2, 1.0)


def check_result(result: CommandResult, check: bool) -> CommandResult:
    if check and result.exit_code != 0:
        raise CommandExitError(result)
    return result


def create_body(name: Optional[str], image: Optional[str], size: Optional[str],
                idle_timeout: Optional[int], idle_action: Optional[str],
                env: Optional[Dict[str, str]], labels: Optional[Dict[str, str]],
                network: Optional[Json], auto_start: Optional[bool] = None) -> Json:
    body: Json = {"name": name or "ws-" + uuid.uuid4().hex[:10]}
    for key, value in (("image", image), ("size", size), ("idle_timeout", idle_timeout),
                       ("idle_action", idle_action), ("env", env), ("labels", labels),
                       ("network", network), ("auto_start", auto_start)):
        if value is not None:
            body[key] = value
    return body


def command_deadline(core: Core, timeout: Optional[float],
                     request_timeout: Optional[float]) -> Deadline:
    if request_timeout is not None:
        return Deadline(request_timeout)
    return Deadline(timeout + COMMAND_GRACE if timeout else None)


def reraise_unexpected(e: BaseException) -> BerthError:
    return BerthError(f"{type(e).__name__}: {e}", code="internal")
