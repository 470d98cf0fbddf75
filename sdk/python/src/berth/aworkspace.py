"""AsyncWorkspace: the asyncio client, generated from workspace.py by
tools/gen_async.py (do not edit). Every method is one op of _core.Core run by the async
driver; AsyncWorkspace (aworkspace.py) has the same methods, awaited.

`timeout` and `request_timeout`, everywhere:
  timeout          how long the command may run; the agent kills it after (commands.run).
  request_timeout  how long the client waits for this call, retries included (seconds; default
                   60, or the Workspace's own; 300 for calls that wait for a boot)."""

from __future__ import annotations

from typing import IO, Any, AsyncIterator, Dict, Iterable, List, Literal, Optional, Sequence, Union, overload

from . import _core
from ._core import Callback, check_result, command_deadline, create_body, resolve_config
from ._async import AsyncConnection as Connection
from .types import CommandResult, EntryInfo, Json, Preview, ProcessInfo, WorkspaceInfo

Source = Union[bytes, IO[bytes], IO[str], Iterable[bytes]]


def _connect(url: Optional[str], api_key: Optional[str],
             request_timeout: Optional[float]) -> Connection:
    return Connection(resolve_config(url, api_key, request_timeout))


class AsyncCommandHandle:
    """A background command: `wait()` for its end, `kill()` it, `send_stdin()`. Reattach
    later with `ws.commands.connect(pid_or_tag)`."""

    def __init__(self, ws: "AsyncWorkspace", pid: int, tag: Optional[str],
                 on_stdout: Optional[Callback] = None, on_stderr: Optional[Callback] = None) -> None:
        self._ws, self.pid, self.tag = ws, pid, tag
        self._on_stdout, self._on_stderr = on_stdout, on_stderr

    @property
    def _id(self) -> str:
        return self.tag or str(self.pid)

    async def wait(self, on_stdout: Optional[Callback] = None, on_stderr: Optional[Callback] = None,
             check: bool = True, request_timeout: Optional[float] = None) -> CommandResult:
        """Waits for the end; its whole output (what the agent buffered, then live) goes to
        the callbacks. CommandExitError on a non-zero exit unless check=False."""
        conn = self._ws._conn
        result = await conn.run(conn.core.process_output(
            self._ws.id, self._id, on_stdout or self._on_stdout, on_stderr or self._on_stderr,
            _core.Deadline(request_timeout)))
        result.pid = result.pid or self.pid
        return check_result(result, check)

    async def kill(self, request_timeout: Optional[float] = None) -> bool:
        """SIGKILL to its process group; False when there was no such process."""
        conn = self._ws._conn
        return await conn.run(conn.core.kill(self._ws.id, self._id, conn.core.deadline(request_timeout)))

    async def send_stdin(self, data: Union[str, bytes], close: bool = False,
                   request_timeout: Optional[float] = None) -> None:
        conn = self._ws._conn
        await conn.run(conn.core.send_stdin(self._ws.id, self._id, data, close,
                                      conn.core.deadline(request_timeout)))

    async def info(self, request_timeout: Optional[float] = None) -> ProcessInfo:
        conn = self._ws._conn
        return await conn.run(conn.core.process(self._ws.id, self._id,
                                          conn.core.deadline(request_timeout)))


class AsyncCommands:
    """`ws.commands`: run commands and manage background ones."""

    def __init__(self, ws: "AsyncWorkspace") -> None:
        self._ws = ws

    @overload
    async def run(self, cmd: Union[str, Sequence[str]], background: Literal[False] = False,
            on_stdout: Optional[Callback] = None, on_stderr: Optional[Callback] = None,
            timeout: Optional[float] = _core.DEFAULT_COMMAND_TIMEOUT, cwd: Optional[str] = None,
            user: Optional[str] = None, env: Optional[Dict[str, str]] = None,
            stdin: Union[None, str, bytes] = None, check: bool = True, tag: Optional[str] = None,
            request_timeout: Optional[float] = None) -> CommandResult: ...

    @overload
    async def run(self, cmd: Union[str, Sequence[str]], background: Literal[True],
            on_stdout: Optional[Callback] = None, on_stderr: Optional[Callback] = None,
            timeout: Optional[float] = _core.DEFAULT_COMMAND_TIMEOUT, cwd: Optional[str] = None,
            user: Optional[str] = None, env: Optional[Dict[str, str]] = None,
            stdin: Union[None, str, bytes] = None, check: bool = True, tag: Optional[str] = None,
            request_timeout: Optional[float] = None) -> AsyncCommandHandle: ...

    async def run(self, cmd: Union[str, Sequence[str]], background: bool = False,
            on_stdout: Optional[Callback] = None, on_stderr: Optional[Callback] = None,
            timeout: Optional[float] = _core.DEFAULT_COMMAND_TIMEOUT, cwd: Optional[str] = None,
            user: Optional[str] = None, env: Optional[Dict[str, str]] = None,
            stdin: Union[None, str, bytes] = None, check: bool = True, tag: Optional[str] = None,
            request_timeout: Optional[float] = None) -> Union[CommandResult, AsyncCommandHandle]:
        """Runs `cmd` (a string for /bin/sh -c, or an argv list). Waits for its end and
        answers a CommandResult (CommandExitError on a non-zero exit unless check=False), or
        with background=True answers a CommandHandle at once. `timeout`: how long the command
        may run (the agent kills it after; default 60 s, but no limit for a background one
        unless given; None: no limit). `request_timeout`: how long the client waits (default:
        timeout + 30 s; with no timeout, as long as the stream lives)."""
        conn = self._ws._conn
        body = conn.core.exec_body(cmd, None if background and timeout ==
                                   _core.DEFAULT_COMMAND_TIMEOUT else timeout,
                                   cwd, user, env, stdin, tag, background)
        if background:
            j = await conn.run(conn.core.start_background(self._ws.id, body,
                                                    conn.core.deadline(request_timeout)))
            return AsyncCommandHandle(self._ws, int(j.get("pid", 0)), j.get("tag"), on_stdout,
                                 on_stderr)
        result = await conn.run(conn.core.run(self._ws.id, body, on_stdout, on_stderr,
                                        command_deadline(conn.core, timeout, request_timeout)))
        return check_result(result, check)

    async def list(self, request_timeout: Optional[float] = None) -> List[ProcessInfo]:
        """Processes started through the API, running or recently ended."""
        conn = self._ws._conn
        return await conn.run(conn.core.processes(self._ws.id, conn.core.deadline(request_timeout)))

    async def connect(self, pid_or_tag: Union[int, str],
                request_timeout: Optional[float] = None) -> AsyncCommandHandle:
        """Reattaches to a process by pid or tag (NotFoundError if there is none)."""
        conn = self._ws._conn
        p = await conn.run(conn.core.process(self._ws.id, str(pid_or_tag),
                                       conn.core.deadline(request_timeout)))
        return AsyncCommandHandle(self._ws, p.pid, p.tag)

    async def kill(self, pid_or_tag: Union[int, str], request_timeout: Optional[float] = None) -> bool:
        conn = self._ws._conn
        return await conn.run(conn.core.kill(self._ws.id, str(pid_or_tag),
                                       conn.core.deadline(request_timeout)))


class AsyncFiles:
    """`ws.files`: absolute paths in the workspace; `user` picks whose uid reads or writes."""

    def __init__(self, ws: "AsyncWorkspace") -> None:
        self._ws = ws

    @overload
    async def read(self, path: str, format: Literal["text"] = "text", user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> str: ...

    @overload
    async def read(self, path: str, format: Literal["bytes"], user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> bytes: ...

    async def read(self, path: str, format: str = "text", user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> Union[str, bytes]:
        """A file's contents, whole (use download() for big files)."""
        conn = self._ws._conn
        data = await conn.run(conn.core.read_file(self._ws.id, path, user,
                                            conn.core.deadline(request_timeout)))
        return data if format == "bytes" else data.decode("utf-8", "replace")

    async def write(self, path: str, data: Union[str, bytes, IO[bytes], IO[str]],
              user: Optional[str] = None, mode: Optional[int] = None,
              request_timeout: Optional[float] = None) -> EntryInfo:
        """Writes a file atomically (parents made); a file object streams."""
        return await self.upload(path, data.encode("utf-8") if isinstance(data, str) else data,
                           user=user, mode=mode, request_timeout=request_timeout)

    async def upload(self, path: str, source: Source, user: Optional[str] = None,
               mode: Optional[int] = None, request_timeout: Optional[float] = None) -> EntryInfo:
        """Streams bytes, a file object or an iterable of bytes to `path`, in chunks: never
        whole in memory. request_timeout: default 3600 s."""
        conn = self._ws._conn
        return await conn.run(conn.core.upload(self._ws.id, path, source, user, mode,
                                         _core.Deadline(request_timeout or 3600.0)))

    @overload
    async def download(self, path: str, dest: None = None, user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> AsyncIterator[bytes]: ...

    @overload
    async def download(self, path: str, dest: IO[bytes], user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> int: ...

    async def download(self, path: str, dest: Optional[IO[bytes]] = None, user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> Union[AsyncIterator[bytes], int]:
        """Streams a file: an iterator of chunks, or written to `dest` (answers the bytes).
        request_timeout: default 3600 s; a stalled stream fails after 45 s anyway."""
        conn = self._ws._conn
        op = conn.core.download(self._ws.id, path, user, dest,
                                _core.Deadline(request_timeout or 3600.0))
        if dest is None:
            return conn.iterate(op)
        return await conn.run(op)

    async def list(self, path: str, user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> List[EntryInfo]:
        conn = self._ws._conn
        return await conn.run(conn.core.list_dir(self._ws.id, path, user,
                                           conn.core.deadline(request_timeout)))

    async def exists(self, path: str, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> bool:
        conn = self._ws._conn
        return await conn.run(conn.core.exists(self._ws.id, path, user,
                                         conn.core.deadline(request_timeout)))

    async def stat(self, path: str, user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> EntryInfo:
        conn = self._ws._conn
        return await conn.run(conn.core.stat(self._ws.id, path, user,
                                       conn.core.deadline(request_timeout)))

    async def remove(self, path: str, recursive: bool = True, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> None:
        """Removes a file, or a directory with what is in it (as E2B's remove)."""
        conn = self._ws._conn
        await conn.run(conn.core.remove(self._ws.id, path, recursive, user,
                                  conn.core.deadline(request_timeout)))

    async def rename(self, old_path: str, new_path: str, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> EntryInfo:
        conn = self._ws._conn
        return await conn.run(conn.core.rename(self._ws.id, old_path, new_path, user,
                                         conn.core.deadline(request_timeout)))

    async def make_dir(self, path: str, user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> bool:
        """Makes a directory and its parents; False when it was there already."""
        conn = self._ws._conn
        return await conn.run(conn.core.make_dir(self._ws.id, path, user,
                                           conn.core.deadline(request_timeout)))


class AsyncPreviews:
    """`ws.previews`: links to a port of the workspace (docs/api.md, "Previews")."""

    def __init__(self, ws: "AsyncWorkspace") -> None:
        self._ws = ws

    async def create(self, port: int, public: bool = False, expires_in: Union[None, int, str] = None,
               request_timeout: Optional[float] = None) -> Preview:
        """A private link (`.link`, with its token) unless public; expires_in: seconds or
        "2h" (default berthd's, 24 h)."""
        conn = self._ws._conn
        return await conn.run(conn.core.create_preview(self._ws.id, port, public, expires_in,
                                                 conn.core.deadline(request_timeout)))

    async def list(self, request_timeout: Optional[float] = None) -> List[Preview]:
        conn = self._ws._conn
        return await conn.run(conn.core.previews(self._ws.id, conn.core.deadline(request_timeout)))

    async def revoke(self, preview_id: str, request_timeout: Optional[float] = None) -> Preview:
        conn = self._ws._conn
        return await conn.run(conn.core.revoke_preview(self._ws.id, preview_id,
                                                 conn.core.deadline(request_timeout)))


class AsyncWorkspace:
    """A Berth workspace (a Linux VM of its own). Make one with create(), connect() or
    get_or_create(); `commands`, `files` and `previews` act in it."""

    def __init__(self, info: WorkspaceInfo, conn: Connection, owns: bool = True) -> None:
        self._info, self._conn, self._owns = info, conn, owns
        self.commands = AsyncCommands(self)
        self.files = AsyncFiles(self)
        self.previews = AsyncPreviews(self)

    @property
    def id(self) -> str:
        return self._info.id

    @property
    def name(self) -> str:
        return self._info.name

    @property
    def state(self) -> str:
        """The state when last seen (info() asks berthd again)."""
        return self._info.state

    def __repr__(self) -> str:
        return f"AsyncWorkspace(id={self.id!r}, name={self.name!r}, state={self.state!r})"

    async def close(self) -> None:
        """Closes the client's connections (the workspace itself lives on)."""
        if self._owns:
            await self._conn.close()

    async def __aenter__(self) -> "AsyncWorkspace":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @classmethod
    async def create(cls, name: Optional[str] = None, image: Optional[str] = None,
               size: Optional[str] = None, idle_timeout: Optional[int] = None,
               idle_action: Optional[str] = None, env: Optional[Dict[str, str]] = None,
               labels: Optional[Dict[str, str]] = None, network: Optional[Json] = None,
               wait: bool = True, url: Optional[str] = None, api_key: Optional[str] = None,
               request_timeout: Optional[float] = None) -> "AsyncWorkspace":
        """Creates a workspace (a name is made up when none is given) and, with wait, waits
        until it runs (berthd's POST …/wait; request_timeout default 300 s). Sent with an
        Idempotency-Key, so the SDK's own retries never make two."""
        conn = _connect(url, api_key, None)
        try:
            info = await conn.run(conn.core.create(
                create_body(name, image, size, idle_timeout, idle_action, env, labels, network),
                wait, _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))
        except BaseException:
            await conn.close()
            raise
        return cls(info, conn)

    @classmethod
    async def connect(cls, name_or_id: str, url: Optional[str] = None, api_key: Optional[str] = None,
                request_timeout: Optional[float] = None) -> "AsyncWorkspace":
        """An existing workspace, woken (started and waited for) if it sleeps."""
        conn = _connect(url, api_key, None)
        try:
            info = await conn.run(conn.core.ensure_running(
                name_or_id, _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))
        except BaseException:
            await conn.close()
            raise
        return cls(info, conn)

    @classmethod
    async def get_or_create(cls, name: str, image: Optional[str] = None, size: Optional[str] = None,
                      idle_timeout: Optional[int] = None, idle_action: Optional[str] = None,
                      env: Optional[Dict[str, str]] = None,
                      labels: Optional[Dict[str, str]] = None, network: Optional[Json] = None,
                      wait: bool = True, url: Optional[str] = None, api_key: Optional[str] = None,
                      request_timeout: Optional[float] = None) -> "AsyncWorkspace":
        """The workspace named `name`, woken, or made with these settings if there is none."""
        conn = _connect(url, api_key, None)
        try:
            info = await conn.run(conn.core.get_or_create(
                name, create_body(name, image, size, idle_timeout, idle_action, env, labels,
                                  network),
                wait, _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))
        except BaseException:
            await conn.close()
            raise
        return cls(info, conn)

    @classmethod
    async def list(cls, state: Optional[str] = None, label: Union[None, str, Dict[str, str]] = None,
             url: Optional[str] = None, api_key: Optional[str] = None,
             request_timeout: Optional[float] = None, page_size: int = 100) -> AsyncIterator["AsyncWorkspace"]:
        """Every workspace that matches, page after page (`page_size` a page, 1-1000);
        `label` "k=v" or {"k": "v"}. request_timeout applies to each page."""
        conn = _connect(url, api_key, request_timeout)
        async for info in conn.iterate(conn.core.list(state, label, request_timeout, page_size)):
            yield cls(info, conn, owns=False)

    async def info(self, request_timeout: Optional[float] = None) -> WorkspaceInfo:
        """The workspace as berthd has it now."""
        self._info = await self._conn.run(self._conn.core.get(self.id,
                                                        self._conn.core.deadline(request_timeout)))
        return self._info

    async def _lifecycle(self, action: str, body: Optional[Json], settle: Optional[str],
                   request_timeout: Optional[float]) -> WorkspaceInfo:
        self._info = await self._conn.run(self._conn.core.lifecycle(
            self.id, action, body, settle,
            _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))
        return self._info

    async def start(self, wait: bool = True, request_timeout: Optional[float] = None) -> WorkspaceInfo:
        """Starts it (a hibernated one resumes); with wait, until it runs."""
        return await self._lifecycle("start", None, "running" if wait else None, request_timeout)

    async def stop(self, force: bool = False, wait: bool = True,
             request_timeout: Optional[float] = None) -> WorkspaceInfo:
        """Powers it off (forced at once with force); with wait, until it is stopped."""
        return await self._lifecycle("stop", {"force": True} if force else None,
                               "stopped" if wait else None, request_timeout)

    async def hibernate(self, wait: bool = True,
                  request_timeout: Optional[float] = None) -> WorkspaceInfo:
        """Saves memory and processes to disk; with wait, until it is hibernated."""
        return await self._lifecycle("hibernate", None, "hibernated" if wait else None,
                               request_timeout)

    async def delete(self, wait: bool = False, request_timeout: Optional[float] = None) -> None:
        """Deletes it and its disks; with wait, until berthd has (GET answers 404)."""
        await self._conn.run(self._conn.core.delete(
            self.id, wait, _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))

    async def set_idle(self, timeout: Optional[int] = None, action: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> WorkspaceInfo:
        """Sets how long it may idle (seconds) and what then happens ("stop" | "hibernate")."""
        body: Json = {}
        if timeout is not None:
            body["idle_timeout"] = timeout
        if action is not None:
            body["idle_action"] = action
        self._info = await self._conn.run(self._conn.core.patch(
            self.id, body, self._conn.core.deadline(request_timeout)))
        return self._info

    async def get_host(self, port: int, request_timeout: Optional[float] = None) -> str:
        """The preview host of `port` ("5173-web.preview.localhost:8420"), as E2B's get_host;
        waits (default 30 s) for something to listen there. The preview is private: open it
        with an API key or a link from previews.create()."""
        return await self._conn.run(self._conn.core.get_host(
            self.id, port, _core.Deadline(request_timeout or 30.0)))
