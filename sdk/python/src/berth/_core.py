"""The SDK's one implementation, sans-IO: every call is a generator ("an op") that yields
effects (send this request, read from that stream, sleep, run this blocking function, hand
this value to the caller's iterator) and gets their results sent back. Two small drivers
perform them: _sync.py with httpx.Client, _async.py with httpx.AsyncClient. This file has
the effects and the request primitives; the ops are in _ops_*.py, gathered in _api.Core.

Why this shape rather than an async core behind a sync facade (an event loop on a helper
thread): the sync client then needs no thread and no loop of its own, so it works inside a
program that already runs one (Jupyter, an async agent framework) and its callbacks run on
the caller's thread; the async client cancels cleanly (CancelledError lands in the op at its
current effect); and the logic that matters (deadlines, Retry-After, waking, paging, NDJSON
streams, error mapping) exists once, tested through both drivers. The public classes are
one-line delegations to the ops, and the async ones are generated from the sync ones
(tools/gen_async.py), so names, signatures and docs cannot drift apart.

Deadlines: every op gets a Deadline; each request's timeouts are cut to what is left of it,
and a stream read waits at most the stream's idle limit (berthd and the agent send a
keepalive line every 15 s on every stream, so silence means the far end is gone)."""

from __future__ import annotations

import inspect
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, Generator, List, Optional, Tuple, TypeVar, Union
from urllib.parse import quote, urlsplit

from .errors import (CommandExitError, InternalError, InvalidArgumentError, AuthError,
                     TimeoutError, UnavailableError, error_from_answer)
from .types import CommandResult, Json

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
#: A WebSocket (a PTY) quiet for this long gets a ping: the agent sends no keepalives on it, and
#: a PTY may rightly print nothing for hours; no answer within STREAM_IDLE_TIMEOUT is a dead link.
WS_PING_INTERVAL = 15.0
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

    def resendable(self) -> bool:
        """Whether the body can be sent again from its start (bytes, a seekable file)."""
        return isinstance(self.source, (bytes, bytearray, memoryview)) or self.start is not None

    def rewind(self) -> None:
        """Makes the body ready to be sent (again): a seekable file goes back to where it
        started. Only called for a body that has not been sent or is resendable."""
        if self.used and self.start is not None:
            self.source.seek(self.start)
        self.used = True


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
    # A WebSocket upgrade: a 101 answers a Reply whose handle takes WsRecv/WsSend/WsClose.
    websocket: bool = False
    # The stream outlives the op that opened it (a follow op Adopts it); not closed at its end.
    detach: bool = False


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


@dataclass
class Adopt:
    """Makes the driver close `handle` (a stream or a WebSocket) when this op ends, however it
    ends: how a follow op takes over what an open op (Request.detach) left open."""
    handle: Any


@dataclass
class Abort:
    """Cuts a stream or WebSocket that another thread or task is reading (its read then fails
    at once); how a handle's stop()/disconnect() ends a follow op without waiting for data."""
    handle: Any


@dataclass
class WsRecv:
    """The next WebSocket message: ("text" | "binary", data), ("pong", b""), ("idle", b"") when
    nothing came within `timeout` seconds, ("close", b"") after the server's close frame, or
    ("aborted", b"") once Abort cut it. A connection that breaks raises UnavailableError."""
    handle: Any
    timeout: float


@dataclass
class WsSend:
    """Sends one message: kind "text", "binary" or "ping"."""
    handle: Any
    kind: str
    data: bytes


Effect = Union[Send, Read, Close, Sleep, Blocking, Await, Emit, Adopt, Abort, WsRecv, WsSend]


class StopToken:
    """Shared by a handle and the follow op it started: stop() sets `stopped` and aborts
    `handle`, and the op ends quietly instead of failing."""

    def __init__(self) -> None:
        self.stopped = False
        self.handle: Any = None


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
class CoreBase:
    """Configuration and the request primitives (send with retries, call, read) that the
    ops (_ops_*.py) build on. Holds configuration only (no I/O, no state that a call
    changes), so any number of calls may run at once."""

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
        # A body read from an iterator is gone once sent: such a request is not sent again.
        replayable = req.replayable and (req.body is None or req.body.resendable())
        while True:
            if req.body is not None:
                req.body.rewind()
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
                if (e.status is None and replayable and failures < 2
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
            if 200 <= reply.status < 300 or (req.websocket and reply.status == 101):
                return reply
            if reply.status in (429, 503) and replayable:
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


def check_result(result: CommandResult, check: bool) -> CommandResult:
    if check and result.exit_code != 0:
        raise CommandExitError(result)
    return result


def create_body(name: Optional[str], image: Optional[str], size: Optional[str],
                idle_timeout: Optional[int], idle_action: Optional[str],
                env: Optional[Dict[str, str]], labels: Optional[Dict[str, str]],
                network: Optional[Json], auto_start: Optional[bool] = None,
                screen: Optional[str] = None, template: Optional[str] = None,
                from_workspace: Optional[str] = None,
                from_checkpoint: Optional[str] = None) -> Json:
    """POST /v1/workspaces's body: the fields given. With `template` or `from_workspace` it is
    a fork (docs/api.md, "Forks", "Templates"), where berthd takes only name and labels beside
    them and answers a 400 naming any other field."""
    body: Json = {"name": name or "ws-" + uuid.uuid4().hex[:10]}
    for key, value in (("image", image), ("size", size), ("idle_timeout", idle_timeout),
                       ("idle_action", idle_action), ("env", env), ("labels", labels),
                       ("network", network), ("auto_start", auto_start), ("screen", screen),
                       ("template", template)):
        if value is not None:
            body[key] = value
    if from_checkpoint is not None and from_workspace is None:
        raise InvalidArgumentError("from_checkpoint names a checkpoint of from_workspace: give "
                                   "from_workspace too", code="invalid_argument")
    if from_workspace is not None:
        source: Json = {"workspace": from_workspace}
        if from_checkpoint is not None:
            source["checkpoint"] = from_checkpoint
        body["from"] = source
    return body


def is_fork(body: Json) -> bool:
    """Whether a POST /v1/workspaces body makes a fork (of a workspace or a template)."""
    return "from" in body or "template" in body


def command_deadline(core: CoreBase, timeout: Optional[float],
                     request_timeout: Optional[float]) -> Deadline:
    if request_timeout is not None:
        return Deadline(request_timeout)
    return Deadline(timeout + COMMAND_GRACE if timeout else None)
