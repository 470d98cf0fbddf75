"""Workspace: the blocking client. Every method is one op of _core.Core run by the sync
driver; AsyncWorkspace (aworkspace.py) has the same methods, awaited.

`timeout` and `request_timeout`, everywhere:
  timeout          how long the command may run; the agent kills it after (commands.run).
  request_timeout  how long the client waits for this call, retries included (seconds; default
                   60, or the Workspace's own; 300 for calls that wait for a boot)."""

from __future__ import annotations

from typing import (IO, Any, Callable, Dict, Iterable, Iterator, List, Literal, Optional, Sequence,
                    Type, Union, overload)

from . import _core
from ._core import (Callback, StopToken, check_result, command_deadline, create_body,
                    resolve_config)
from ._ops_events import Filter, Since, event_params
from ._ops_pty import PtySession
from ._ops_templates import build_deadline, template_body
from ._sync import Connection
from .types import (Action, ActionsResult, Checkpoint, CheckpointDiff, Click, CommandResult,
                    DesktopControl, DesktopTicket, DirTransfer, Drag, EntryInfo, Event, Json, Key,
                    MouseButton, Move, NetworkStatus, Point, Preview, ProcessInfo, RestoreResult,
                    Screenshot, Scroll, Template, TypeText, WatchEvent, WorkspaceInfo)

Source = Union[bytes, IO[bytes], IO[str], Iterable[bytes]]


def _connect(url: Optional[str], api_key: Optional[str],
             request_timeout: Optional[float]) -> Connection:
    return Connection(resolve_config(url, api_key, request_timeout))


def _ws_id(ws: Union[None, str, "Workspace"]) -> Optional[str]:
    """A workspace as berthd's bodies name it: an id or name as given, a Workspace's id."""
    return ws if ws is None or isinstance(ws, str) else ws.id


class CommandHandle:
    """A background command: `wait()` for its end, `kill()` it, `send_stdin()`. Reattach
    later with `ws.commands.connect(pid_or_tag)`."""

    def __init__(self, ws: "Workspace", pid: int, tag: Optional[str],
                 on_stdout: Optional[Callback] = None, on_stderr: Optional[Callback] = None) -> None:
        self._ws, self.pid, self.tag = ws, pid, tag
        self._on_stdout, self._on_stderr = on_stdout, on_stderr

    @property
    def _id(self) -> str:
        return self.tag or str(self.pid)

    def wait(self, on_stdout: Optional[Callback] = None, on_stderr: Optional[Callback] = None,
             check: bool = True, request_timeout: Optional[float] = None) -> CommandResult:
        """Waits for the end; its whole output (what the agent buffered, then live) goes to
        the callbacks. CommandExitError on a non-zero exit unless check=False."""
        conn = self._ws._conn
        result = conn.run(conn.core.process_output(
            self._ws.id, self._id, on_stdout or self._on_stdout, on_stderr or self._on_stderr,
            _core.Deadline(request_timeout)))
        result.pid = result.pid or self.pid
        return check_result(result, check)

    def kill(self, request_timeout: Optional[float] = None) -> bool:
        """SIGKILL to its process group; False when there was no such process."""
        conn = self._ws._conn
        return conn.run(conn.core.kill(self._ws.id, self._id, conn.core.deadline(request_timeout)))

    def send_stdin(self, data: Union[str, bytes], close: bool = False,
                   request_timeout: Optional[float] = None) -> None:
        conn = self._ws._conn
        conn.run(conn.core.send_stdin(self._ws.id, self._id, data, close,
                                      conn.core.deadline(request_timeout)))

    def info(self, request_timeout: Optional[float] = None) -> ProcessInfo:
        conn = self._ws._conn
        return conn.run(conn.core.process(self._ws.id, self._id,
                                          conn.core.deadline(request_timeout)))


class Commands:
    """`ws.commands`: run commands and manage background ones."""

    def __init__(self, ws: "Workspace") -> None:
        self._ws = ws

    @overload
    def run(self, cmd: Union[str, Sequence[str]], background: Literal[False] = False,
            on_stdout: Optional[Callback] = None, on_stderr: Optional[Callback] = None,
            timeout: Optional[float] = _core.DEFAULT_COMMAND_TIMEOUT, cwd: Optional[str] = None,
            user: Optional[str] = None, env: Optional[Dict[str, str]] = None,
            stdin: Union[None, str, bytes] = None, check: bool = True, tag: Optional[str] = None,
            request_timeout: Optional[float] = None) -> CommandResult: ...

    @overload
    def run(self, cmd: Union[str, Sequence[str]], background: Literal[True],
            on_stdout: Optional[Callback] = None, on_stderr: Optional[Callback] = None,
            timeout: Optional[float] = _core.DEFAULT_COMMAND_TIMEOUT, cwd: Optional[str] = None,
            user: Optional[str] = None, env: Optional[Dict[str, str]] = None,
            stdin: Union[None, str, bytes] = None, check: bool = True, tag: Optional[str] = None,
            request_timeout: Optional[float] = None) -> CommandHandle: ...

    def run(self, cmd: Union[str, Sequence[str]], background: bool = False,
            on_stdout: Optional[Callback] = None, on_stderr: Optional[Callback] = None,
            timeout: Optional[float] = _core.DEFAULT_COMMAND_TIMEOUT, cwd: Optional[str] = None,
            user: Optional[str] = None, env: Optional[Dict[str, str]] = None,
            stdin: Union[None, str, bytes] = None, check: bool = True, tag: Optional[str] = None,
            request_timeout: Optional[float] = None) -> Union[CommandResult, CommandHandle]:
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
            j = conn.run(conn.core.start_background(self._ws.id, body,
                                                    conn.core.deadline(request_timeout)))
            return CommandHandle(self._ws, int(j.get("pid", 0)), j.get("tag"), on_stdout,
                                 on_stderr)
        result = conn.run(conn.core.run(self._ws.id, body, on_stdout, on_stderr,
                                        command_deadline(conn.core, timeout, request_timeout)))
        return check_result(result, check)

    def list(self, request_timeout: Optional[float] = None) -> List[ProcessInfo]:
        """Processes started through the API, running or recently ended."""
        conn = self._ws._conn
        return conn.run(conn.core.processes(self._ws.id, conn.core.deadline(request_timeout)))

    def connect(self, pid_or_tag: Union[int, str],
                request_timeout: Optional[float] = None) -> CommandHandle:
        """Reattaches to a process by pid or tag (NotFoundError if there is none)."""
        conn = self._ws._conn
        p = conn.run(conn.core.process(self._ws.id, str(pid_or_tag),
                                       conn.core.deadline(request_timeout)))
        return CommandHandle(self._ws, p.pid, p.tag)

    def kill(self, pid_or_tag: Union[int, str], request_timeout: Optional[float] = None) -> bool:
        conn = self._ws._conn
        return conn.run(conn.core.kill(self._ws.id, str(pid_or_tag),
                                       conn.core.deadline(request_timeout)))


class PtyHandle:
    """An interactive terminal in the workspace (pty.create or pty.connect). Its output goes
    to `on_data` as bytes as it comes (on a thread of the client's own in Workspace, in a task
    in AsyncWorkspace); send_stdin() types, resize() resizes, wait() waits for its end, kill()
    ends it, disconnect() leaves it running for pty.connect(pid) later."""

    def __init__(self, ws: "Workspace", session: PtySession,
                 on_data: Optional[Callable[[bytes], Any]]) -> None:
        self._ws, self._session = ws, session
        self.pid, self.tag = session.pid, session.tag
        conn = ws._conn
        self._job = conn.spawn(conn.core.pty_follow(session, on_data))

    def send_stdin(self, data: Union[str, bytes]) -> None:
        """Types `data` into the terminal ("ls\\n"; "\\x03" is Ctrl-C, "\\x04" Ctrl-D)."""
        conn = self._ws._conn
        conn.run(conn.core.pty_send(self._session, data))

    def resize(self, cols: int, rows: int) -> None:
        """Changes the terminal's size (the process gets SIGWINCH)."""
        conn = self._ws._conn
        conn.run(conn.core.pty_resize(self._session, cols, rows))

    def wait(self, check: bool = True, request_timeout: Optional[float] = None) -> CommandResult:
        """Waits for the process to end: a CommandResult with its exit code (the output went to
        on_data). CommandExitError on a non-zero exit unless check=False; UnavailableError
        within seconds if the workspace stops; request_timeout (default: none) bounds the
        wait, and the terminal runs on if it passes."""
        conn = self._ws._conn
        result = conn.join(self._job, request_timeout, f"terminal {self.pid}")
        return check_result(result, check)

    def kill(self, request_timeout: Optional[float] = None) -> bool:
        """SIGKILL to its process group; False when it had already ended."""
        conn = self._ws._conn
        return conn.run(conn.core.kill(self._ws.id, str(self.pid),
                                       conn.core.deadline(request_timeout)))

    def disconnect(self) -> None:
        """Closes this client's connection; the process runs on (pty.connect(pid) reattaches,
        and replays what it printed). wait() then raises."""
        conn = self._ws._conn
        conn.run(conn.core.pty_disconnect(self._session))

    @property
    def running(self) -> bool:
        """Whether this handle still follows the terminal (False once it ended or broke)."""
        return not self._job.done()


class Pty:
    """`ws.pty`: interactive terminals (E2B's pty)."""

    def __init__(self, ws: "Workspace") -> None:
        self._ws = ws

    def create(self, cols: int = 80, rows: int = 24,
               on_data: Optional[Callable[[bytes], Any]] = None,
               cmd: Union[None, str, Sequence[str]] = None, cwd: Optional[str] = None,
               user: Optional[str] = None, env: Optional[Dict[str, str]] = None,
               tag: Optional[str] = None, request_timeout: Optional[float] = None) -> PtyHandle:
        """Starts `cmd` (default: the user's login shell) on a terminal of cols x rows and
        answers its handle once it runs. It runs until it exits or is killed (no `timeout`);
        `tag` names it for pty.connect(tag)."""
        conn = self._ws._conn
        start = conn.core.pty_start_body(cols, rows, cmd, cwd, user, env, tag)
        session = conn.run(conn.core.pty_open(self._ws.id, start, None,
                                              conn.core.deadline(request_timeout)))
        return PtyHandle(self._ws, session, on_data)

    def connect(self, pid_or_tag: Union[int, str],
                on_data: Optional[Callable[[bytes], Any]] = None,
                request_timeout: Optional[float] = None) -> PtyHandle:
        """Reattaches to a running terminal by pid or tag: what it printed so far (the agent's
        buffer) comes to on_data first, then live output. NotFoundError if there is none."""
        conn = self._ws._conn
        session = conn.run(conn.core.pty_open(self._ws.id, None, str(pid_or_tag),
                                              conn.core.deadline(request_timeout)))
        return PtyHandle(self._ws, session, on_data)

    def kill(self, pid_or_tag: Union[int, str], request_timeout: Optional[float] = None) -> bool:
        """SIGKILL to a terminal's process group by pid or tag; False when there was none."""
        conn = self._ws._conn
        return conn.run(conn.core.kill(self._ws.id, str(pid_or_tag),
                                       conn.core.deadline(request_timeout)))


class WatchHandle:
    """A directory being watched (files.watch_dir): stop() ends it. `error` holds why it ended
    on its own (None: stopped, or the directory was removed)."""

    def __init__(self, ws: "Workspace", path: str, handle: Any,
                 on_event: Callable[[WatchEvent], Any],
                 on_exit: Optional[Callable[[Optional[BaseException]], Any]]) -> None:
        self._ws, self.path = ws, path
        self._token = StopToken()
        self._token.handle = handle
        conn = ws._conn
        self._job = conn.spawn(conn.core.watch_follow(ws.id, path, handle, self._token, on_event,
                                                      on_exit))

    def stop(self) -> None:
        """Stops watching: no event reaches on_event after this returns."""
        conn = self._ws._conn
        conn.run(conn.core.watch_stop(self._token))

    def wait(self, request_timeout: Optional[float] = None) -> None:
        """Waits until the watch ends: returns after stop() or the directory's removal; raises
        UnavailableError when the workspace stopped under it."""
        conn = self._ws._conn
        conn.join(self._job, request_timeout, f"watch {self.path}")

    @property
    def running(self) -> bool:
        return not self._job.done()


class Files:
    """`ws.files`: absolute paths in the workspace; `user` picks whose uid reads or writes."""

    def __init__(self, ws: "Workspace") -> None:
        self._ws = ws

    @overload
    def read(self, path: str, format: Literal["text"] = "text", user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> str: ...

    @overload
    def read(self, path: str, format: Literal["bytes"], user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> bytes: ...

    def read(self, path: str, format: str = "text", user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> Union[str, bytes]:
        """A file's contents, whole (use download() for big files)."""
        conn = self._ws._conn
        data = conn.run(conn.core.read_file(self._ws.id, path, user,
                                            conn.core.deadline(request_timeout)))
        return data if format == "bytes" else data.decode("utf-8", "replace")

    def write(self, path: str, data: Union[str, bytes, IO[bytes], IO[str]],
              user: Optional[str] = None, mode: Optional[int] = None,
              request_timeout: Optional[float] = None) -> EntryInfo:
        """Writes a file atomically (parents made); a file object streams."""
        return self.upload(path, data.encode("utf-8") if isinstance(data, str) else data,
                           user=user, mode=mode, request_timeout=request_timeout)

    def upload(self, path: str, source: Source, user: Optional[str] = None,
               mode: Optional[int] = None, request_timeout: Optional[float] = None) -> EntryInfo:
        """Streams bytes, a file object or an iterable of bytes to `path`, in chunks: never
        whole in memory. request_timeout: default 3600 s."""
        conn = self._ws._conn
        return conn.run(conn.core.upload(self._ws.id, path, source, user, mode,
                                         _core.Deadline(request_timeout or 3600.0)))

    @overload
    def download(self, path: str, dest: None = None, user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> Iterator[bytes]: ...

    @overload
    def download(self, path: str, dest: IO[bytes], user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> int: ...

    def download(self, path: str, dest: Optional[IO[bytes]] = None, user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> Union[Iterator[bytes], int]:
        """Streams a file: an iterator of chunks, or written to `dest` (answers the bytes).
        request_timeout: default 3600 s; a stalled stream fails after 45 s anyway."""
        conn = self._ws._conn
        op = conn.core.download(self._ws.id, path, user, dest,
                                _core.Deadline(request_timeout or 3600.0))
        if dest is None:
            return conn.iterate(op)
        return conn.run(op)

    def list(self, path: str, user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> List[EntryInfo]:
        conn = self._ws._conn
        return conn.run(conn.core.list_dir(self._ws.id, path, user,
                                           conn.core.deadline(request_timeout)))

    def exists(self, path: str, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> bool:
        conn = self._ws._conn
        return conn.run(conn.core.exists(self._ws.id, path, user,
                                         conn.core.deadline(request_timeout)))

    def stat(self, path: str, user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> EntryInfo:
        conn = self._ws._conn
        return conn.run(conn.core.stat(self._ws.id, path, user,
                                       conn.core.deadline(request_timeout)))

    def remove(self, path: str, recursive: bool = True, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> None:
        """Removes a file, or a directory with what is in it (as E2B's remove)."""
        conn = self._ws._conn
        conn.run(conn.core.remove(self._ws.id, path, recursive, user,
                                  conn.core.deadline(request_timeout)))

    def rename(self, old_path: str, new_path: str, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> EntryInfo:
        conn = self._ws._conn
        return conn.run(conn.core.rename(self._ws.id, old_path, new_path, user,
                                         conn.core.deadline(request_timeout)))

    def make_dir(self, path: str, user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> bool:
        """Makes a directory and its parents; False when it was there already."""
        conn = self._ws._conn
        return conn.run(conn.core.make_dir(self._ws.id, path, user,
                                           conn.core.deadline(request_timeout)))

    def watch_dir(self, path: str, on_event: Callable[[WatchEvent], Any],
                  recursive: bool = False,
                  on_exit: Optional[Callable[[Optional[BaseException]], Any]] = None,
                  user: Optional[str] = None,
                  request_timeout: Optional[float] = None) -> WatchHandle:
        """Watches a directory (with recursive, what is below it too): each change goes to
        on_event as a WatchEvent as it happens (on a thread of the client's own in
        Workspace). Answers once the watch is in place, so a change made after it returns
        is seen. It ends on stop(), when the directory is removed, or with an error
        (UnavailableError within seconds when the workspace stops); on_exit gets None or
        the error."""
        conn = self._ws._conn
        handle = conn.run(conn.core.watch_open(self._ws.id, path, recursive, user,
                                               conn.core.deadline(request_timeout)))
        return WatchHandle(self._ws, path, handle, on_event, on_exit)

    def upload_dir(self, local_dir: str, remote_dir: str, user: Optional[str] = None,
                   request_timeout: Optional[float] = None) -> DirTransfer:
        """Copies what is in local_dir into remote_dir (made with its parents; files there
        are replaced, others kept), as one tar stream made while it is sent. Symlinks stay
        symlinks. request_timeout: default 3600 s."""
        conn = self._ws._conn
        return conn.run(conn.core.upload_dir(self._ws.id, local_dir, remote_dir, user,
                                             _core.Deadline(request_timeout or 3600.0)))

    def download_dir(self, remote_dir: str, local_dir: str, user: Optional[str] = None,
                     request_timeout: Optional[float] = None) -> DirTransfer:
        """Copies what is in remote_dir into local_dir (made if missing), extracting the tar
        stream as it arrives. An entry that would land outside local_dir (an absolute name,
        '..', a path through a symlink) is refused with InvalidArgumentError; set-id bits are
        cleared and FIFOs left out. request_timeout: default 3600 s."""
        conn = self._ws._conn
        return conn.run(conn.core.download_dir(self._ws.id, remote_dir, local_dir, user,
                                               _core.Deadline(request_timeout or 3600.0)))


class Previews:
    """`ws.previews`: links to a port of the workspace (docs/api.md, "Previews")."""

    def __init__(self, ws: "Workspace") -> None:
        self._ws = ws

    def create(self, port: int, public: bool = False, expires_in: Union[None, int, str] = None,
               request_timeout: Optional[float] = None) -> Preview:
        """A private link (`.link`, with its token) unless public; expires_in: seconds or
        "2h" (default berthd's, 24 h)."""
        conn = self._ws._conn
        return conn.run(conn.core.create_preview(self._ws.id, port, public, expires_in,
                                                 conn.core.deadline(request_timeout)))

    def list(self, request_timeout: Optional[float] = None) -> List[Preview]:
        conn = self._ws._conn
        return conn.run(conn.core.previews(self._ws.id, conn.core.deadline(request_timeout)))

    def revoke(self, preview_id: str, request_timeout: Optional[float] = None) -> Preview:
        conn = self._ws._conn
        return conn.run(conn.core.revoke_preview(self._ws.id, preview_id,
                                                 conn.core.deadline(request_timeout)))


class Checkpoints:
    """`ws.checkpoints`: its disks, and with memory=True its running programs, kept and brought
    back (docs/api.md, "Checkpoints"). A checkpoint is named by its id or its name everywhere."""

    def __init__(self, ws: "Workspace") -> None:
        self._ws = ws

    def create(self, name: Optional[str] = None, memory: bool = False,
               request_timeout: Optional[float] = None) -> Checkpoint:
        """Checkpoints its disks now: running (it keeps running; what its programs wrote is
        synced first) or stopped; ConflictError when hibernated. `name`: unique in the
        workspace (lowercase letters, digits, -), default its id. memory=True also saves the
        running programs' memory, so that a restore resumes them instead of booting: running
        workspaces only (ConflictError when stopped: it has no memory to checkpoint); the guest
        pauses briefly (the checkpoint's `pause_ms`). Never sent twice on its own."""
        conn = self._ws._conn
        return conn.run(conn.core.create_checkpoint(self._ws.id, name, memory,
                                                    conn.core.deadline(request_timeout)))

    def list(self, request_timeout: Optional[float] = None) -> List[Checkpoint]:
        """Its checkpoints, newest first."""
        conn = self._ws._conn
        return conn.run(conn.core.checkpoints(self._ws.id, conn.core.deadline(request_timeout)))

    def get(self, id_or_name: str, request_timeout: Optional[float] = None) -> Checkpoint:
        conn = self._ws._conn
        return conn.run(conn.core.checkpoint(self._ws.id, id_or_name,
                                             conn.core.deadline(request_timeout)))

    def delete(self, id_or_name: str, request_timeout: Optional[float] = None) -> Checkpoint:
        """Deletes a checkpoint (the ones above it keep what they hold); ConflictError while
        it is under the disks of the running workspace, or while the workspace is to resume its
        memory at its next start."""
        conn = self._ws._conn
        return conn.run(conn.core.delete_checkpoint(self._ws.id, id_or_name,
                                                    conn.core.deadline(request_timeout)))

    def restore(self, id_or_name: str, undo: bool = True, wait: bool = True,
                request_timeout: Optional[float] = None) -> RestoreResult:
        """Puts its disks back to the checkpoint. With undo (the default) the state it replaces
        is checkpointed first (`.undo`, kind "before_restore": restore that to undo this). A
        running workspace is stopped, restored and started again. A checkpoint with memory
        brings back its running programs too: the workspace is "starting", then running with
        them resumed, not rebooted (if it was running, its undo keeps its memory as well).
        With wait, this returns once it runs (request_timeout default 300 s: a boot under TCG
        takes a minute). Never sent twice on its own."""
        conn = self._ws._conn
        result = conn.run(conn.core.restore_checkpoint(
            self._ws.id, id_or_name, undo, wait,
            _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))
        self._ws._info = result.workspace
        return result

    def diff(self, id_or_name: str, to: str = "current", max_entries: Optional[int] = None,
             request_timeout: Optional[float] = None) -> CheckpointDiff:
        """What changed from a checkpoint to another (`to`: its id or name), or to the workspace
        as it is now (`to="current"`, the default): files added, changed and removed under
        /workspace and the home directory (`.files`, each list at most `max_entries` long,
        1-10000, berthd's default 1000; `.files.counts` counts them all and `.files.truncated`
        says a list was cut), and Debian packages installed, changed and removed (`.packages`).
        The guest compares the checkpoints' disks, so a stopped or hibernated workspace is
        started first, as for a command (request_timeout default 300 s: a boot and a walk of
        the file system). NotFoundError for an unknown checkpoint, InvalidArgumentError for
        "current" as the first one or a max_entries out of range, ConflictError
        (failed_precondition) when the workspace's agent cannot mount the disks."""
        conn = self._ws._conn
        return conn.run(conn.core.diff_checkpoint(
            self._ws.id, id_or_name, to, max_entries,
            _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))

    def fork(self, id_or_name: str, name: Optional[str] = None, count: int = 1,
             labels: Optional[Dict[str, str]] = None, wait: bool = True,
             request_timeout: Optional[float] = None) -> List["Workspace"]:
        """New workspaces made from a checkpoint (docs/api.md, "Forks"): `count` (1-16) of them,
        named `name` for one, else name-1 … name-<count> (no name: one is made up), each with
        its disks as new layers on the checkpoint's (no copy) and a machine of its own (hostname,
        machine-id, agent token, MAC, ...); from a checkpoint with memory it resumes the
        checkpoint's programs instead of booting. A fork has the source's image, size, settings,
        env and network policy; only its name and `labels` are its own. Answers a Workspace per
        fork (`forked_from` in its info() is the checkpoint's id), with wait once each runs
        (request_timeout default 300 s, for them all). NotFoundError for an unknown checkpoint,
        ConflictError for one still being taken, AlreadyExistsError for a name taken,
        QuotaExceededError when the tenant has no room for all of them. While a fork exists the
        checkpoint (and the ones under it, and this workspace) cannot be deleted. Never sent
        twice on its own."""
        conn = self._ws._conn
        forks = conn.run(conn.core.fork_checkpoint(
            self._ws.id, id_or_name, name, count, labels, wait,
            _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))
        # Each fork a handle with a connection of its own: closing one leaves the others open.
        return [type(self._ws)(info, Connection(conn.core.config)) for info in forks]


def _chain(exc: BaseException, failure: BaseException, what: str) -> None:
    """Hangs `failure` (the rollback's) on the chain of `exc` (the block's), which stays the
    one that propagates: traceback prints the failure above it, and a note says what failed.
    The failure's own context was `exc`; it takes over exc's earlier one instead, so that the
    chain has no cycle."""
    failure.__context__ = exc.__context__
    exc.__context__ = failure
    add_note = getattr(exc, "add_note", None)  # Python 3.11+
    if add_note is not None:
        add_note(f"berth: {what} failed: {failure!r}")


class CheckpointScope:
    """What `ws.checkpoint()` returns, for `with` (`async with` on AsyncWorkspace): the
    block's changes to the disks are rolled back if it raises. `checkpoint` is the one taken
    on entering, `restored` the restore's answer after a rollback (its `undo` holds the failed
    state), `rollback_error` why a rollback failed."""

    def __init__(self, ws: "Workspace", name: Optional[str], keep: bool, memory: bool,
                 request_timeout: Optional[float]) -> None:
        self._ws, self._name, self._keep, self._timeout = ws, name, keep, request_timeout
        self._memory = memory
        self.checkpoint: Optional[Checkpoint] = None
        self.restored: Optional[RestoreResult] = None
        self.rollback_error: Optional[BaseException] = None

    def __enter__(self) -> Checkpoint:
        self.checkpoint = self._ws.checkpoints.create(self._name, memory=self._memory,
                                                      request_timeout=self._timeout)
        return self.checkpoint

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Any) -> None:
        cp = self.checkpoint
        if cp is None:
            return
        if exc is None:
            if not self._keep:
                self._ws.checkpoints.delete(cp.id, request_timeout=self._timeout)
            return
        # Exceptions only: KeyboardInterrupt, SystemExit or a cancelled task ask to stop now,
        # not after a restore and a boot; the checkpoint stays, to restore by hand.
        if not isinstance(exc, Exception):
            return
        try:
            self.restored = self._ws.checkpoints.restore(cp.id, undo=True, wait=True,
                                                         request_timeout=self._timeout)
        except Exception as failure:  # the block's exception goes on, with this chained
            self.rollback_error = failure
            _chain(exc, failure, f"rolling {self._ws.name} back to checkpoint {cp.name}")


class Templates:
    """The tenant's templates (docs/api.md, "Templates"): checkpoints with memory published
    under a name, or built by berthd from a setup script, from which
    `Workspace.create(template=name)` makes workspaces that start with the template's programs
    already running instead of booting. A template is named by its name or its id (`tpl_…`).
    Each call connects on its own (url / api_key / BERTH_URL / BERTH_API_KEY as
    Workspace.create)."""

    @staticmethod
    def create(name: str, workspace: Union[None, str, "Workspace"] = None,
               checkpoint: Optional[str] = None, url: Optional[str] = None,
               api_key: Optional[str] = None, request_timeout: Optional[float] = None, *,
               script: Optional[str] = None, start: Optional[str] = None,
               ready: Optional[str] = None, image: Optional[str] = None,
               size: Optional[str] = None, timeout_s: Optional[int] = None,
               wait: bool = True) -> Template:
        """Makes the template `name`, in one of two ways (giving both, or neither, is an
        InvalidArgumentError before anything is sent).

        From a checkpoint: publishes `workspace`'s (a Workspace, an id or a name) checkpoint
        `checkpoint` (id or name; it must have memory); without `checkpoint`, a checkpoint with
        memory named "template-<name>" is taken of the workspace now (it must be running or
        hibernated). ConflictError for a checkpoint without memory ("has no memory"),
        NotFoundError for an unknown workspace or checkpoint. While the template exists, its
        checkpoint and workspace cannot be deleted. It is "ready" at once.

        Built from `script` (at most 64 KiB, run with `bash -e` as the workspace's user in their
        home): berthd makes a workspace "template-<name>" (so `name` has at most 48
        characters) of `image` ("base" or "desktop"; default base) and `size` (default small),
        runs the script, then `start` in the background (a dev server, a database) and `ready`
        every second until it exits 0 (`curl -sf http://127.0.0.1:3000/`), and checkpoints the
        workspace's memory: all within `timeout_s` (10-7200; default 1800). berthd answers at
        once with the template "building"; with wait (the default) this returns once it is
        "ready", and raises TemplateBuildError (the build's error and the end of its log) if it
        failed (request_timeout then defaults to timeout_s + 300 s, for the POST and the wait
        together; TimeoutError if it runs out, the build going on). wait=False answers the
        "building" template at once: `Templates.wait(name)` waits for it later.

        AlreadyExistsError for a name taken (by a failed build too: delete it first). Never
        sent twice on its own: berthd takes no Idempotency-Key here."""
        body = template_body(name, _ws_id(workspace), checkpoint, script, start, ready, image,
                             size, timeout_s)
        conn = _connect(url, api_key, None)
        try:
            deadline = (build_deadline(body) if wait and script is not None
                        and request_timeout is None
                        else conn.core.deadline(request_timeout))
            return conn.run(conn.core.create_template(body, wait, deadline))
        finally:
            conn.close()

    @staticmethod
    def wait(name_or_id: str, url: Optional[str] = None, api_key: Optional[str] = None,
             request_timeout: Optional[float] = None) -> Template:
        """Waits for a template's build to end: the Template once it is "ready" (at once for one
        that is not building), TemplateBuildError if it failed (`.error`, `.build_log`; its
        message has both). Asks berthd every half second, then less often (at most every 5 s).
        request_timeout defaults to the build's timeout_s + 300 s from now (berthd ends every
        build within its timeout_s); TimeoutError if it runs out first, the build going on."""
        conn = _connect(url, api_key, None)
        try:
            return conn.run(conn.core.wait_template(
                name_or_id, None if request_timeout is None else _core.Deadline(request_timeout)))
        finally:
            conn.close()

    @staticmethod
    def list(url: Optional[str] = None, api_key: Optional[str] = None,
             request_timeout: Optional[float] = None) -> List[Template]:
        """The tenant's templates, by name."""
        conn = _connect(url, api_key, None)
        try:
            return conn.run(conn.core.templates(conn.core.deadline(request_timeout)))
        finally:
            conn.close()

    @staticmethod
    def get(name_or_id: str, url: Optional[str] = None, api_key: Optional[str] = None,
            request_timeout: Optional[float] = None) -> Template:
        """A template by name or id (NotFoundError if there is none); a built one's with the end
        of its build's output (`build_log`)."""
        conn = _connect(url, api_key, None)
        try:
            return conn.run(conn.core.template(name_or_id, conn.core.deadline(request_timeout)))
        finally:
            conn.close()

    @staticmethod
    def delete(name_or_id: str, url: Optional[str] = None, api_key: Optional[str] = None,
               request_timeout: Optional[float] = None) -> Template:
        """Deletes a template (answers it as it was); workspaces made from it go on. One berthd
        built: its workspace goes too, unless forks stand on its checkpoint; ConflictError while
        it is being built (delete its workspace "template-<name>" to end the build)."""
        conn = _connect(url, api_key, None)
        try:
            return conn.run(conn.core.delete_template(name_or_id,
                                                      conn.core.deadline(request_timeout)))
        finally:
            conn.close()


class Network:
    """`ws.network`: what the workspace's guest may reach (docs/api.md, "Network")."""

    def __init__(self, ws: "Workspace") -> None:
        self._ws = ws

    def get(self, request_timeout: Optional[float] = None) -> NetworkStatus:
        """The policy, whether it is enforced, counters and the last refused destinations."""
        conn = self._ws._conn
        return conn.run(conn.core.network(self._ws.id, conn.core.deadline(request_timeout)))

    def set(self, egress: Optional[str] = None, allow: Optional[List[str]] = None,
            request_timeout: Optional[float] = None) -> NetworkStatus:
        """Replaces the policy, applied at once: egress "open" | "none" | "allowlist" (allow
        alone means allowlist) of names ("github.com", "*.pypi.org") and CIDRs."""
        conn = self._ws._conn
        return conn.run(conn.core.set_network(self._ws.id, egress, allow,
                                              conn.core.deadline(request_timeout)))


class Desktop:
    """`ws.desktop` (docs/api.md, "Desktop"): the agent's eyes and hands on the workspace's
    screen (screenshot, act and its shortcuts), its clipboard (clipboard, set_clipboard), who
    controls the desktop's input (a person takes over with take_over and hands back with
    release), viewer tickets, and the DevTools endpoint of the workspace's Chrome (cdp_url).
    Actions are checked before they are sent, with berthd's limits (InvalidArgumentError);
    while a person holds control they raise LockedError (holder "human", by, since)."""

    def __init__(self, ws: "Workspace") -> None:
        self._ws = ws

    def screenshot(self, format: Literal["png", "jpeg"] = "png", scale: float = 1.0,
                   quality: Optional[int] = None,
                   request_timeout: Optional[float] = None) -> Screenshot:
        """The screen now: `.data` (PNG, or JPEG of `quality` 1-100, berthd's default 80),
        `.screen` and `.image` sizes; scale 0.05-1 shrinks the image (`.to_screen(x, y)` maps
        its points back). LockedError during a private takeover."""
        conn = self._ws._conn
        return conn.run(conn.core.desktop_screenshot(self._ws.id, format, scale, quality,
                                                     conn.core.deadline(request_timeout)))

    def act(self, actions: Union[Action, Json, Sequence[Union[Action, Json]]],
            request_timeout: Optional[float] = None) -> ActionsResult:
        """Runs a batch of actions (Move, Click, MouseDown, MouseUp, Drag, Scroll, TypeText,
        Key, HoldKey, Wait, or dicts in berthd's shape; 1-200) in order, as one request: a bad
        one anywhere sends nothing. request_timeout default 120 s (a batch may pause 30 s)."""
        conn = self._ws._conn
        return conn.run(conn.core.desktop_actions(self._ws.id, actions,
                                                  _core.Deadline(request_timeout or 120.0)))

    def move(self, x: int, y: int, request_timeout: Optional[float] = None) -> ActionsResult:
        """The pointer to (x, y), the screen's pixels."""
        return self.act(Move(x, y), request_timeout=request_timeout)

    def click(self, x: int, y: int, button: MouseButton = "left", count: int = 1,
              request_timeout: Optional[float] = None) -> ActionsResult:
        """A click at (x, y); count 2 is a double click, 3 a triple one."""
        return self.act(Click(x, y, button, count), request_timeout=request_timeout)

    def type(self, text: str, request_timeout: Optional[float] = None) -> ActionsResult:
        """Types text: printable ASCII, newline and tab (at most 10 000 characters); for any
        other text, set_clipboard(text) and then key("ctrl+v")."""
        return self.act(TypeText(text), request_timeout=request_timeout)

    def key(self, keys: str, request_timeout: Optional[float] = None) -> ActionsResult:
        """Presses a key or a combination: "Return", "ctrl+c", "ctrl+shift+t", "alt+F4"."""
        return self.act(Key(keys), request_timeout=request_timeout)

    def scroll(self, x: int, y: int, dy: int = 0, dx: int = 0,
               request_timeout: Optional[float] = None) -> ActionsResult:
        """Wheel notches at (x, y): dy > 0 down, dx > 0 right (each -50..50)."""
        return self.act(Scroll(x, y, dy, dx), request_timeout=request_timeout)

    def drag(self, start: Point, end: Point, button: MouseButton = "left",
             request_timeout: Optional[float] = None) -> ActionsResult:
        """Presses at start, moves to end, releases (Drag takes a path of up to 100 points)."""
        return self.act(Drag([start, end], button), request_timeout=request_timeout)

    def clipboard(self, request_timeout: Optional[float] = None) -> str:
        """The text on the guest's clipboard ("" when it holds none; at most 1 MiB).
        LockedError during someone else's private takeover (the person may have copied a password),
        ConflictError when the image has no desktop clipboard, UnavailableError while the
        display is not up."""
        conn = self._ws._conn
        return conn.run(conn.core.desktop_clipboard(self._ws.id,
                                                conn.core.deadline(request_timeout)))

    def set_clipboard(self, text: str, request_timeout: Optional[float] = None) -> int:
        """Puts text (any Unicode, at most 1 MiB of UTF-8: InvalidArgumentError before
        anything is sent) on the guest's clipboard and returns its size in bytes; then
        `key("ctrl+v")` pastes it where typing reaches only ASCII. LockedError while a person
        holds control (but for their own key)."""
        conn = self._ws._conn
        return conn.run(conn.core.desktop_set_clipboard(self._ws.id, text,
                                                        conn.core.deadline(request_timeout)))

    def cdp_url(self) -> str:
        """The DevTools endpoint of the workspace's Chrome through berthd,
        `<url>/v1/workspaces/{id}/desktop/cdp`; it takes the API key as a bearer token:
        `chromium.connect_over_cdp(url, headers={"Authorization": f"Bearer {key}"})`."""
        return self._ws._conn.core.desktop_cdp_url(self._ws.id)

    def control(self, request_timeout: Optional[float] = None) -> DesktopControl:
        """Who holds control now: holder "agent" or "human"."""
        conn = self._ws._conn
        return conn.run(conn.core.desktop_control(self._ws.id, None,
                                                  conn.core.deadline(request_timeout)))

    def wait_release(self, timeout: float = 60.0,
                     request_timeout: Optional[float] = None) -> DesktopControl:
        """Waits (at most `timeout` seconds, 3600 at most) until the agent holds control again,
        without polling; read `holder` to see which came first."""
        conn = self._ws._conn
        return conn.run(conn.core.desktop_control(
            self._ws.id, timeout, _core.Deadline(request_timeout or timeout + 30.0)))

    def wait_for_control_change(self, revision: Optional[int] = None, timeout: float = 60.0,
                                request_timeout: Optional[float] = None) -> DesktopControl:
        """Waits (at most `timeout` seconds; berthd holds each wait, no polling) until the
        control state's `revision` is not `revision` (None: the current one): a takeover,
        hand-back, help request or withdrawal, not a lease's renewal. Returns the state then,
        or at the timeout (compare its `revision`). ConflictError once the workspace is not
        running (stopped, hibernated, error), NotFoundError once deleted. request_timeout
        (the whole call) default: timeout + 30 s; TimeoutError if it runs out first."""
        conn = self._ws._conn
        return conn.run(conn.core.desktop_wait_change(
            self._ws.id, revision, timeout, _core.Deadline(request_timeout or timeout + 30.0)))

    def take_over(self, private: bool = False, reason: Optional[str] = None,
                  lease: Optional[int] = None,
                  request_timeout: Optional[float] = None) -> DesktopControl:
        """A person takes control (a lease, renewed by their input); private: the agent may
        not read the screen meanwhile; lease: seconds of their own, shorter than the
        operator's (15 min). ConflictError while someone else holds it."""
        conn = self._ws._conn
        return conn.run(conn.core.desktop_takeover(self._ws.id, private, reason, lease,
                                                   conn.core.deadline(request_timeout)))

    def release(self, note: Optional[str] = None,
                request_timeout: Optional[float] = None) -> DesktopControl:
        """Hands control back to the agent."""
        conn = self._ws._conn
        return conn.run(conn.core.desktop_release(self._ws.id, note,
                                                  conn.core.deadline(request_timeout)))

    def request_human(self, reason: str, timeout: Optional[float] = 600.0,
                      request_timeout: Optional[float] = None) -> DesktopControl:
        """Asks a person to take over (the desktop page shows `reason`) and waits (at most
        `timeout` seconds, 3600 at most; None: answers at once) until one took over and handed
        back: `answered`, `url` (the desktop page, to send them to) and, when answered,
        `handback` (note, by, tabs_before, tabs_after). A request nobody took is withdrawn at
        the timeout. request_timeout default: timeout + 30 s."""
        conn = self._ws._conn
        return conn.run(conn.core.desktop_request_human(
            self._ws.id, reason, timeout,
            _core.Deadline(request_timeout or timeout + 30.0) if timeout
            else conn.core.deadline(request_timeout)))

    def withdraw_request(self, request_timeout: Optional[float] = None) -> DesktopControl:
        """Withdraws a request for a person that nobody has taken yet."""
        conn = self._ws._conn
        return conn.run(conn.core.desktop_withdraw_request(self._ws.id,
                                                           conn.core.deadline(request_timeout)))

    def ticket(self, mode: str = "view", request_timeout: Optional[float] = None) -> DesktopTicket:
        """A one-time ticket for one browser viewer (noVNC), "view" or "control", valid 60 s."""
        conn = self._ws._conn
        return conn.run(conn.core.desktop_ticket(self._ws.id, mode,
                                                 conn.core.deadline(request_timeout)))


class Workspace:
    """A Berth workspace (a Linux VM of its own). Make one with create(), connect() or
    get_or_create(); `commands`, `files`, `previews`, `checkpoints` (and the other
    attributes) act on it."""

    def __init__(self, info: WorkspaceInfo, conn: Connection, owns: bool = True) -> None:
        self._info, self._conn, self._owns = info, conn, owns
        self.commands = Commands(self)
        self.pty = Pty(self)
        self.files = Files(self)
        self.previews = Previews(self)
        self.network = Network(self)
        self.desktop = Desktop(self)
        self.checkpoints = Checkpoints(self)

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
        return f"Workspace(id={self.id!r}, name={self.name!r}, state={self.state!r})"

    def close(self) -> None:
        """Closes the client's connections (the workspace itself lives on)."""
        if self._owns:
            self._conn.close()

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @classmethod
    def create(cls, name: Optional[str] = None, image: Optional[str] = None,
               size: Optional[str] = None, idle_timeout: Optional[int] = None,
               idle_action: Optional[str] = None, env: Optional[Dict[str, str]] = None,
               labels: Optional[Dict[str, str]] = None, network: Optional[Json] = None,
               wait: bool = True, url: Optional[str] = None, api_key: Optional[str] = None,
               request_timeout: Optional[float] = None,
               screen: Optional[str] = None, template: Optional[str] = None,
               from_workspace: Union[None, str, "Workspace"] = None,
               from_checkpoint: Optional[str] = None) -> "Workspace":
        """Creates a workspace (a name is made up when none is given) and, with wait, waits
        until it runs (berthd's POST …/wait; request_timeout default 300 s). Sent with an
        Idempotency-Key, so the SDK's own retries never make two. `screen`: the desktop's
        size, "WIDTHxHEIGHT" (width 640-3840 and a multiple of 8, height 480-2160; berthd's
        default 1280x800).

        `template` (a template's name or id, see Templates): the workspace is made from it,
        running with the template's programs already started (NotFoundError for an unknown
        one). `from_workspace` (a Workspace, an id or a name) and `from_checkpoint`: the workspace is a fork
        of that workspace's checkpoint, or, without from_checkpoint, of a checkpoint taken of
        it now (with memory when it is running or hibernated; docs/api.md, "Forks"). Either
        way it has its source's image, size, settings, env and network policy: only `name`
        and `labels` may be given beside them (any other is berthd's InvalidArgumentError).
        berthd takes no Idempotency-Key for these, so they are never sent twice on its own."""
        conn = _connect(url, api_key, None)
        try:
            info = conn.run(conn.core.create(
                create_body(name, image, size, idle_timeout, idle_action, env, labels, network,
                            screen=screen, template=template,
                            from_workspace=_ws_id(from_workspace),
                            from_checkpoint=from_checkpoint),
                wait, _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))
        except BaseException:
            conn.close()
            raise
        return cls(info, conn)

    @classmethod
    def connect(cls, name_or_id: str, url: Optional[str] = None, api_key: Optional[str] = None,
                request_timeout: Optional[float] = None) -> "Workspace":
        """An existing workspace, woken (started and waited for) if it sleeps."""
        conn = _connect(url, api_key, None)
        try:
            info = conn.run(conn.core.ensure_running(
                name_or_id, _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))
        except BaseException:
            conn.close()
            raise
        return cls(info, conn)

    @classmethod
    def get_or_create(cls, name: str, image: Optional[str] = None, size: Optional[str] = None,
                      idle_timeout: Optional[int] = None, idle_action: Optional[str] = None,
                      env: Optional[Dict[str, str]] = None,
                      labels: Optional[Dict[str, str]] = None, network: Optional[Json] = None,
                      wait: bool = True, url: Optional[str] = None, api_key: Optional[str] = None,
                      request_timeout: Optional[float] = None,
                      screen: Optional[str] = None, template: Optional[str] = None,
                      from_workspace: Union[None, str, "Workspace"] = None,
                      from_checkpoint: Optional[str] = None) -> "Workspace":
        """The workspace named `name`, woken, or made with these settings if there is none
        (`template` and `from_*` as for create())."""
        conn = _connect(url, api_key, None)
        try:
            info = conn.run(conn.core.get_or_create(
                name, create_body(name, image, size, idle_timeout, idle_action, env, labels,
                                  network, screen=screen, template=template,
                                  from_workspace=_ws_id(from_workspace),
                                  from_checkpoint=from_checkpoint),
                wait, _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))
        except BaseException:
            conn.close()
            raise
        return cls(info, conn)

    @classmethod
    def list(cls, state: Optional[str] = None, label: Union[None, str, Dict[str, str]] = None,
             url: Optional[str] = None, api_key: Optional[str] = None,
             request_timeout: Optional[float] = None, page_size: int = 100) -> Iterator["Workspace"]:
        """Every workspace that matches, page after page (`page_size` a page, 1-1000);
        `label` "k=v" or {"k": "v"}. request_timeout applies to each page."""
        conn = _connect(url, api_key, request_timeout)
        for info in conn.iterate(conn.core.list(state, label, request_timeout, page_size)):
            yield cls(info, conn, owns=False)

    def info(self, request_timeout: Optional[float] = None) -> WorkspaceInfo:
        """The workspace as berthd has it now."""
        self._info = self._conn.run(self._conn.core.get(self.id,
                                                        self._conn.core.deadline(request_timeout)))
        return self._info

    def events(self, type: Filter = None, actor: Filter = None, since: Since = None,
               after: int = 0, limit: int = 100,
               request_timeout: Optional[float] = None) -> List[Event]:
        """A page of its timeline, oldest first: at most `limit` (1-1000) events after the
        event id `after`. Filters: `type` "exec" or a list, a family ending in * ("desktop_*");
        `actor` "key_…", "system", "guest", "preview", or "key" for every key (a list for
        several); `since` a datetime (UTC if naive), unix seconds or ISO 8601."""
        return self._conn.run(self._conn.core.events(
            self.id, event_params(type, actor, since, after, limit),
            self._conn.core.deadline(request_timeout)))

    def follow_events(self, type: Filter = None, actor: Filter = None, since: Since = None,
                      after: int = 0, limit: int = 100,
                      request_timeout: Optional[float] = None) -> Iterator[Event]:
        """Its timeline live: every event after `after` that passes the filters (as events()),
        the backlog first, then each as it happens, for as long as the caller iterates (until
        the workspace is deleted). close() the iterator (or break out of the loop) to end it.
        request_timeout bounds opening the stream; then a stream silent for 45 s (keepalives
        come every 15 s) raises TimeoutError."""
        conn = self._conn
        for info in conn.iterate(conn.core.follow_events(
                self.id, event_params(type, actor, since, after, limit),
                conn.core.deadline(request_timeout))):
            yield info

    def _lifecycle(self, action: str, body: Optional[Json], settle: Optional[str],
                   request_timeout: Optional[float]) -> WorkspaceInfo:
        self._info = self._conn.run(self._conn.core.lifecycle(
            self.id, action, body, settle,
            _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))
        return self._info

    def start(self, wait: bool = True, request_timeout: Optional[float] = None) -> WorkspaceInfo:
        """Starts it (a hibernated one resumes); with wait, until it runs."""
        return self._lifecycle("start", None, "running" if wait else None, request_timeout)

    def stop(self, force: bool = False, wait: bool = True,
             request_timeout: Optional[float] = None) -> WorkspaceInfo:
        """Powers it off (forced at once with force); with wait, until it is stopped."""
        return self._lifecycle("stop", {"force": True} if force else None,
                               "stopped" if wait else None, request_timeout)

    def hibernate(self, wait: bool = True,
                  request_timeout: Optional[float] = None) -> WorkspaceInfo:
        """Saves memory and processes to disk; with wait, until it is hibernated."""
        return self._lifecycle("hibernate", None, "hibernated" if wait else None,
                               request_timeout)

    def delete(self, wait: bool = False, request_timeout: Optional[float] = None) -> None:
        """Deletes it and its disks; with wait, until berthd has (GET answers 404)."""
        self._conn.run(self._conn.core.delete(
            self.id, wait, _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))

    def kill(self, request_timeout: Optional[float] = None) -> None:
        """E2B's name for delete(): deletes it and its disks (berthd finishes in the
        background)."""
        self._conn.run(self._conn.core.delete(
            self.id, False, _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))

    def set_idle(self, timeout: Optional[int] = None, action: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> WorkspaceInfo:
        """Sets how long it may idle (seconds) and what then happens ("stop" | "hibernate")."""
        body: Json = {}
        if timeout is not None:
            body["idle_timeout"] = timeout
        if action is not None:
            body["idle_action"] = action
        self._info = self._conn.run(self._conn.core.patch(
            self.id, body, self._conn.core.deadline(request_timeout)))
        return self._info

    def fork(self, name: Optional[str] = None, checkpoint: Optional[str] = None,
             labels: Optional[Dict[str, str]] = None, wait: bool = True,
             request_timeout: Optional[float] = None) -> "Workspace":
        """A new workspace made from this one (docs/api.md, "Forks"): from its checkpoint
        `checkpoint` (id or name), or without one from a checkpoint taken now (with memory when
        it runs or is hibernated: the fork resumes its programs instead of booting). The fork
        is a machine of its own with this one's image, size, settings, env and network policy;
        only `name` (made up when None) and `labels` are its own. With wait, returned once it
        runs (request_timeout default 300 s). Create(from_workspace=...) in short; to make
        several at once from one checkpoint, checkpoints.fork(cp, count=N)."""
        conn = Connection(self._conn.core.config)
        try:
            info = conn.run(conn.core.create(
                create_body(name, None, None, None, None, None, labels, None,
                            from_workspace=self.id, from_checkpoint=checkpoint),
                wait, _core.Deadline(request_timeout or _core.DEFAULT_WAIT_TIMEOUT)))
        except BaseException:
            conn.close()
            raise
        return type(self)(info, conn)

    def checkpoint(self, name: Optional[str] = None, keep: bool = True, memory: bool = False,
                   request_timeout: Optional[float] = None) -> CheckpointScope:
        """`with ws.checkpoint() as cp:` checkpoints it on entering (checkpoints.create); if
        the block raises an Exception, restores that checkpoint (undo=True: the failed state
        is kept as the "before_restore" checkpoint) and waits until it runs again if it ran,
        then the block's exception propagates; a failed restore is chained to it, never raised
        instead. On success the checkpoint stays, unless keep=False (then it is deleted).
        memory=True (a running workspace only) checkpoints its memory too: a rollback then
        resumes its programs as they were on entering instead of booting it."""
        return CheckpointScope(self, name, keep, memory, request_timeout)

    def get_host(self, port: int, request_timeout: Optional[float] = None) -> str:
        """The preview host of `port` ("5173-web.preview.localhost:8420"), as E2B's get_host;
        waits (default 30 s) for something to listen there. The preview is private: open it
        with an API key or a link from previews.create()."""
        return self._conn.run(self._conn.core.get_host(
            self.id, port, _core.Deadline(request_timeout or 30.0)))
