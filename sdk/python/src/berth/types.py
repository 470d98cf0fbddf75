"""What the SDK's calls answer: plain dataclasses parsed tolerantly from berthd's JSON (a field
berthd adds later never breaks an older SDK); `.raw` keeps the whole answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple, TypeVar, Union
from urllib.parse import urlsplit

Json = Dict[str, Any]
_T = TypeVar("_T")


def _str(j: Json, key: str, default: str = "") -> str:
    v = j.get(key)
    return v if isinstance(v, str) else default


def _opt_str(j: Json, key: str) -> Optional[str]:
    v = j.get(key)
    return v if isinstance(v, str) else None


def _int(j: Json, key: str, default: int = 0) -> int:
    v = j.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _opt_int(j: Json, key: str) -> Optional[int]:
    v = j.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _strmap(j: Json, key: str) -> Dict[str, str]:
    v = j.get(key)
    return {k: x for k, x in v.items() if isinstance(x, str)} if isinstance(v, dict) else {}


def _list(j: Json, key: str, parse: Callable[[Json], _T]) -> List[_T]:
    """The objects of the list `key`, parsed; anything else in it is skipped."""
    v = j.get(key)
    return [parse(x) for x in v if isinstance(x, dict)] if isinstance(v, list) else []


@dataclass
class WorkspaceInfo:
    """A workspace as berthd reports it (docs/api.md, "Workspaces")."""
    id: str
    name: str
    state: str
    image: str = ""
    size: Optional[str] = None
    cpus: int = 0
    memory_mib: int = 0
    disk_gib: int = 0
    idle_timeout: int = 0
    idle_action: str = ""
    auto_start: bool = True
    env: Dict[str, str] = field(default_factory=dict)
    labels: Dict[str, str] = field(default_factory=dict)
    error: Optional[str] = None
    created_at: str = ""
    started_at: Optional[str] = None
    last_active_at: Optional[str] = None
    screen: Optional[str] = None
    #: A fork's: the checkpoint (another workspace's) its disks were made on.
    forked_from: Optional[str] = None
    raw: Json = field(default_factory=dict, repr=False)

    @staticmethod
    def from_json(j: Json) -> "WorkspaceInfo":
        return WorkspaceInfo(
            id=_str(j, "id"), name=_str(j, "name"), state=_str(j, "state"), image=_str(j, "image"),
            size=_opt_str(j, "size"), cpus=_int(j, "cpus"), memory_mib=_int(j, "memory_mib"),
            disk_gib=_int(j, "disk_gib"), idle_timeout=_int(j, "idle_timeout"),
            idle_action=_str(j, "idle_action"), auto_start=j.get("auto_start") is not False,
            env=_strmap(j, "env"), labels=_strmap(j, "labels"), error=_opt_str(j, "error"),
            created_at=_str(j, "created_at"), started_at=_opt_str(j, "started_at"),
            last_active_at=_opt_str(j, "last_active_at"), screen=_opt_str(j, "screen"),
            forked_from=_opt_str(j, "forked_from"), raw=j)


@dataclass
class CommandResult:
    """How a command ended and what it printed. `exit_code` is 128+N when signal N killed it."""
    exit_code: int
    stdout: str
    stderr: str
    signal: Optional[str] = None
    timed_out: bool = False
    pid: int = 0
    duration_ms: int = 0


@dataclass
class ProcessInfo:
    """A process started through the API, running or recently ended."""
    pid: int
    tag: Optional[str]
    cmd: Union[str, List[str], None]
    user: str
    running: bool
    exit_code: Optional[int]
    signal: Optional[str]
    started_at: str
    ended_at: Optional[str]
    raw: Json = field(default_factory=dict, repr=False)

    @staticmethod
    def from_json(j: Json) -> "ProcessInfo":
        cmd = j.get("cmd")
        return ProcessInfo(
            pid=_int(j, "pid"), tag=_opt_str(j, "tag"),
            cmd=cmd if isinstance(cmd, (str, list)) else None, user=_str(j, "user"),
            running=j.get("status") == "running", exit_code=_opt_int(j, "exit_code"),
            signal=_opt_str(j, "signal"), started_at=_str(j, "started_at"),
            ended_at=_opt_str(j, "ended_at"), raw=j)


@dataclass
class EntryInfo:
    """A file, directory or symlink in a workspace (lstat: a symlink is itself)."""
    name: str
    path: str
    type: str  # "file" | "dir" | "symlink" | "other"
    size: int
    mode: int
    mtime: str
    owner: str = ""
    group: str = ""
    link_target: Optional[str] = None

    @staticmethod
    def from_json(j: Json) -> "EntryInfo":
        try:
            mode = int(_str(j, "mode", "0"), 8)
        except ValueError:
            mode = 0
        return EntryInfo(name=_str(j, "name"), path=_str(j, "path"), type=_str(j, "type"),
                         size=_int(j, "size"), mode=mode, mtime=_str(j, "mtime"),
                         owner=_str(j, "owner"), group=_str(j, "group"),
                         link_target=_opt_str(j, "link_target"))


@dataclass
class Preview:
    """A preview link to a port (docs/api.md, "Previews"). `token` and `link` are only in the
    answer that made a private preview."""
    id: str
    port: int
    public: bool
    status: str
    url: str
    token: Optional[str]
    link: Optional[str]
    expires_at: str
    raw: Json = field(default_factory=dict, repr=False)

    @property
    def host(self) -> str:
        """The preview's host and port, as in `url`: "5173-web.preview.localhost:8420"."""
        return urlsplit(self.url).netloc

    @staticmethod
    def from_json(j: Json) -> "Preview":
        return Preview(id=_str(j, "id"), port=_int(j, "port"), public=j.get("public") is True,
                       status=_str(j, "status"), url=_str(j, "url"), token=_opt_str(j, "token"),
                       link=_opt_str(j, "link"), expires_at=_str(j, "expires_at"), raw=j)


@dataclass
class Checkpoint:
    """A checkpoint: the workspace's disks as they were when it was taken, and with `memory`
    its running programs too (docs/api.md, "Checkpoints"). `kind` is "manual",
    "before_restore" (what a restore replaced, to undo it) or "rolling"; `taken_while` the
    workspace's state then; `parent` the checkpoint under this one; `pause_ms` how long the
    guest was paused to save its memory (None without memory); `size_bytes` what its layers
    (and memory) take on the host; `created_by` who took it (a key's id, or "system")."""
    id: str
    workspace_id: str
    name: str
    kind: str
    memory: bool = False
    parent: Optional[str] = None
    taken_while: str = ""
    pause_ms: Optional[int] = None
    size_bytes: int = 0
    created_by: str = ""
    created_at: str = ""
    raw: Json = field(default_factory=dict, repr=False)

    @staticmethod
    def from_json(j: Json) -> "Checkpoint":
        return Checkpoint(id=_str(j, "id"), workspace_id=_str(j, "workspace_id"),
                          name=_str(j, "name"), kind=_str(j, "kind"),
                          memory=j.get("memory") is True, parent=_opt_str(j, "parent"),
                          taken_while=_str(j, "taken_while"), pause_ms=_opt_int(j, "pause_ms"),
                          size_bytes=_int(j, "size_bytes"), created_by=_str(j, "created_by"),
                          created_at=_str(j, "created_at"), raw=j)


@dataclass
class RestoreResult:
    """What a restore answers: the workspace on the checkpoint's disks (running again, when
    it ran or the checkpoint has memory and the restore waited; else as berthd answered:
    "starting" or "stopped"), and `undo`, the checkpoint of the state the restore replaced
    (None with undo=False)."""
    workspace: WorkspaceInfo
    undo: Optional[Checkpoint]

    @staticmethod
    def from_json(j: Json) -> "RestoreResult":
        ws, undo = j.get("workspace"), j.get("undo")
        return RestoreResult(workspace=WorkspaceInfo.from_json(ws if isinstance(ws, dict) else {}),
                             undo=Checkpoint.from_json(undo) if isinstance(undo, dict) else None)


@dataclass
class FileChange:
    """A file, directory or symlink added, changed or removed (CheckpointDiff.files): `path`
    absolute as the guest sees it, `type` "file", "dir", "symlink" or "other", `size` a file's
    bytes (the new ones for a change; 0 for the other types). A directory added or removed
    whole is one entry: `entries` is how many it held (and `size` their bytes); 0 otherwise."""
    path: str
    type: str
    size: int = 0
    entries: int = 0

    @staticmethod
    def from_json(j: Json) -> "FileChange":
        return FileChange(path=_str(j, "path"), type=_str(j, "type"), size=_int(j, "size"),
                          entries=_int(j, "entries"))


@dataclass
class DiffCounts:
    """How many files were added, changed and removed in all, also past max_entries."""
    added: int = 0
    changed: int = 0
    removed: int = 0


@dataclass
class DiffFiles:
    """The files of a diff: the lists hold at most max_entries each, `counts` all of them;
    `truncated` when a list was cut, or the guest's walk stopped at its time budget (then the
    counts too are of what it compared)."""
    added: List[FileChange] = field(default_factory=list)
    changed: List[FileChange] = field(default_factory=list)
    removed: List[FileChange] = field(default_factory=list)
    counts: DiffCounts = field(default_factory=DiffCounts)
    truncated: bool = False

    @staticmethod
    def from_json(j: Json) -> "DiffFiles":
        found = j.get("counts")
        counts: Json = found if isinstance(found, dict) else {}
        return DiffFiles(added=_list(j, "added", FileChange.from_json),
                         changed=_list(j, "changed", FileChange.from_json),
                         removed=_list(j, "removed", FileChange.from_json),
                         counts=DiffCounts(added=_int(counts, "added"),
                                           changed=_int(counts, "changed"),
                                           removed=_int(counts, "removed")),
                         truncated=j.get("truncated") is True)


@dataclass
class PackageChange:
    """A Debian package ("curl", "libc6:i386") installed, removed or changed: an installed or
    removed one has its `version`, a changed one `from_` (before) and `to` (after)."""
    name: str
    version: Optional[str] = None
    from_: Optional[str] = None
    to: Optional[str] = None

    @staticmethod
    def from_json(j: Json) -> "PackageChange":
        return PackageChange(name=_str(j, "name"), version=_opt_str(j, "version"),
                             from_=_opt_str(j, "from"), to=_opt_str(j, "to"))


@dataclass
class DiffPackages:
    """The Debian packages of a diff: `changed` are those at another version."""
    installed: List[PackageChange] = field(default_factory=list)
    changed: List[PackageChange] = field(default_factory=list)
    removed: List[PackageChange] = field(default_factory=list)

    @staticmethod
    def from_json(j: Json) -> "DiffPackages":
        return DiffPackages(installed=_list(j, "installed", PackageChange.from_json),
                            changed=_list(j, "changed", PackageChange.from_json),
                            removed=_list(j, "removed", PackageChange.from_json))


@dataclass
class CheckpointDiff:
    """What changed from a checkpoint to another, or to the workspace as it is now
    (checkpoints.diff): `from_` the first checkpoint's id, `to` the second's or "current";
    `paths` the trees compared ("/workspace" and the home directory); `files` and `packages`
    what was added, changed and removed there; `took_ms` how long the guest took."""
    from_: str
    to: str
    paths: List[str] = field(default_factory=list)
    files: DiffFiles = field(default_factory=DiffFiles)
    packages: DiffPackages = field(default_factory=DiffPackages)
    took_ms: int = 0
    raw: Json = field(default_factory=dict, repr=False)

    @staticmethod
    def from_json(j: Json) -> "CheckpointDiff":
        files, packages, paths = j.get("files"), j.get("packages"), j.get("paths")
        return CheckpointDiff(
            from_=_str(j, "from"), to=_str(j, "to"),
            paths=[p for p in paths if isinstance(p, str)] if isinstance(paths, list) else [],
            files=DiffFiles.from_json(files if isinstance(files, dict) else {}),
            packages=DiffPackages.from_json(packages if isinstance(packages, dict) else {}),
            took_ms=_int(j, "took_ms"), raw=j)


@dataclass
class Template:
    """A template: a checkpoint with memory published under a name for the tenant; a workspace
    made from it (`Workspace.create(template=...)`) is a fork of that checkpoint, resumed with
    its programs running (docs/api.md, "Templates"). `workspace_id` and `checkpoint_id` are
    what it is; while that workspace is there, `workspace` (its name), `image`, `cpus`,
    `memory_mib` and `disk_gib` say what a workspace made from it is (None once it is gone).

    One built from a script (`Templates.create(name, script=...)`) is `state` "building" (no
    `checkpoint_id` yet, its workspace berthd's "template-<name>"), then "ready", or "failed"
    with `error`; it keeps its request (`script`, `start`, `ready`, `timeout_s`), and
    `Templates.get` answers the end of the build's output in `build_log` (None from list and
    create). A template published from a checkpoint is "ready" and has none of these."""
    id: str
    name: str
    workspace_id: str
    checkpoint_id: str
    workspace: Optional[str] = None
    image: Optional[str] = None
    cpus: Optional[int] = None
    memory_mib: Optional[int] = None
    disk_gib: Optional[int] = None
    created_by: str = ""
    created_at: str = ""
    #: "building", "ready" or "failed" (a berthd from before builds sends none: "ready").
    state: str = "ready"
    #: Why a build failed.
    error: Optional[str] = None
    script: Optional[str] = None
    start: Optional[str] = None
    ready: Optional[str] = None
    timeout_s: Optional[int] = None
    #: The last 16 KiB of the build's output (Templates.get only).
    build_log: Optional[str] = None
    raw: Json = field(default_factory=dict, repr=False)

    @staticmethod
    def from_json(j: Json) -> "Template":
        return Template(id=_str(j, "id"), name=_str(j, "name"),
                        workspace_id=_str(j, "workspace_id"),
                        checkpoint_id=_str(j, "checkpoint_id"),
                        workspace=_opt_str(j, "workspace"), image=_opt_str(j, "image"),
                        cpus=_opt_int(j, "cpus"), memory_mib=_opt_int(j, "memory_mib"),
                        disk_gib=_opt_int(j, "disk_gib"), created_by=_str(j, "created_by"),
                        created_at=_str(j, "created_at"), state=_str(j, "state", "ready"),
                        error=_opt_str(j, "error"), script=_opt_str(j, "script"),
                        start=_opt_str(j, "start"), ready=_opt_str(j, "ready"),
                        timeout_s=_opt_int(j, "timeout_s"), build_log=_opt_str(j, "build_log"),
                        raw=j)


@dataclass
class WatchEvent:
    """A change in a watched directory (files.watch_dir): `type` is "created", "modified",
    "deleted", "moved_from", "moved_to", or "error" (a subdirectory that could not be
    watched, or lost events: `message` says which)."""
    type: str
    path: str
    is_dir: bool = False
    message: str = ""

    @property
    def name(self) -> str:
        """The last component of `path`."""
        return self.path.rsplit("/", 1)[-1]

    @staticmethod
    def from_json(j: Json) -> "WatchEvent":
        return WatchEvent(type=_str(j, "type"), path=_str(j, "path"),
                          is_dir=j.get("is_dir") is True, message=_str(j, "message"))


@dataclass
class DirTransfer:
    """What files.upload_dir / download_dir moved: entries written and bytes of file data;
    `skipped`: entries left out (sockets, FIFOs, unreadable files)."""
    entries: int
    bytes: int
    skipped: int = 0


@dataclass
class NetworkStatus:
    """A workspace's egress policy and what it refused (docs/api.md, "Network")."""
    egress: str
    allow: List[str]
    isolated: bool
    counters: Dict[str, int]
    refused: List[Json]
    refused_names: List[Json]
    raw: Json = field(default_factory=dict, repr=False)

    @staticmethod
    def from_json(j: Json) -> "NetworkStatus":
        allow = j.get("allow")
        counters = j.get("counters")
        return NetworkStatus(
            egress=_str(j, "egress"),
            allow=[a for a in allow if isinstance(a, str)] if isinstance(allow, list) else [],
            isolated=j.get("isolated") is True,
            counters={k: v for k, v in counters.items() if isinstance(v, int)}
            if isinstance(counters, dict) else {},
            refused=[r for r in j.get("refused") or [] if isinstance(r, dict)],
            refused_names=[r for r in j.get("refused_names") or [] if isinstance(r, dict)],
            raw=j)


@dataclass
class DesktopControl:
    """Who controls the desktop's input (docs/api.md, "Desktop"): `holder` "agent" or
    "human"; `by` the key id of the person (or of whoever handed back)."""
    holder: str
    since: Optional[str]
    by: Optional[str]
    lease_expires: Optional[str]
    reason: Optional[str]
    private: bool
    #: The agent's open request for a person ({reason, since, by, taken}), else None.
    request: Optional[Json] = None
    #: The last hand-back: {note, by, cause, at, request, tabs_before, tabs_after}, else None.
    handback: Optional[Json] = None
    #: request_human's answer only: whether a person took over and handed back in time.
    answered: Optional[bool] = None
    #: request_human's answer only: the web UI's desktop page, to send the person to.
    url: Optional[str] = None
    #: Changes with every takeover, hand-back, help request and withdrawal (not with a lease's
    #: renewal) and never repeats within a berthd's life: wait_for_control_change(revision).
    revision: int = 0
    raw: Json = field(default_factory=dict, repr=False)

    @staticmethod
    def from_json(j: Json) -> "DesktopControl":
        req, back, answered = j.get("request"), j.get("handback"), j.get("answered")
        return DesktopControl(holder=_str(j, "holder"), since=_opt_str(j, "since"),
                              by=_opt_str(j, "by"), lease_expires=_opt_str(j, "lease_expires"),
                              reason=_opt_str(j, "reason"), private=j.get("private") is True,
                              request=req if isinstance(req, dict) else None,
                              handback=back if isinstance(back, dict) else None,
                              answered=answered if isinstance(answered, bool) else None,
                              url=_opt_str(j, "url"), revision=_int(j, "revision"), raw=j)


@dataclass
class Event:
    """One event of a workspace's timeline (docs/api.md, "The timeline"): `id` increases (the
    cursor of `after`), `at` is ISO 8601 UTC, `actor` who caused it ("key_…", "system",
    "guest", "preview"), `data` its details (an exec's cmd and exit_code, a state)."""
    id: int
    at: str
    type: str
    actor: str
    message: str
    data: Json
    workspace: str
    raw: Json = field(default_factory=dict, repr=False)

    @staticmethod
    def from_json(j: Json) -> "Event":
        data = j.get("data")
        return Event(id=_int(j, "id"), at=_str(j, "at"), type=_str(j, "type"),
                     actor=_str(j, "actor", "system"), message=_str(j, "message"),
                     data=data if isinstance(data, dict) else {},
                     workspace=_str(j, "workspace"), raw=j)


@dataclass
class DesktopTicket:
    """A one-time ticket that opens one desktop viewer within 60 s: `url` is the WebSocket's
    address with it (for noVNC)."""
    ticket: str
    mode: str
    expires_at: str
    url: str
    raw: Json = field(default_factory=dict, repr=False)

    @staticmethod
    def from_json(j: Json) -> "DesktopTicket":
        return DesktopTicket(ticket=_str(j, "ticket"), mode=_str(j, "mode"),
                             expires_at=_str(j, "expires_at"), url=_str(j, "url"), raw=j)


@dataclass(frozen=True)
class Size:
    """A width and a height in pixels."""
    width: int
    height: int


@dataclass
class Screenshot:
    """The desktop's screen at one moment (desktop.screenshot): `data` is the image (PNG or
    JPEG, as `format` says), `image` its size, `screen` the screen's. Actions take the
    screen's coordinates: `to_screen` maps a point of a scaled image back to them."""
    data: bytes
    format: str  # "png" | "jpeg"
    screen: Size
    image: Size

    @property
    def mime_type(self) -> str:
        return "image/jpeg" if self.format == "jpeg" else "image/png"

    @property
    def scaled(self) -> bool:
        return self.image != self.screen

    def to_screen(self, x: float, y: float) -> Tuple[int, int]:
        """The screen's pixel under the image's pixel (x, y): the centre of the screen's box
        that the image's pixel averages (berthd scales by boxes), inside the screen."""
        sx = int((x + 0.5) * self.screen.width / max(1, self.image.width))
        sy = int((y + 0.5) * self.screen.height / max(1, self.image.height))
        return (min(max(sx, 0), self.screen.width - 1), min(max(sy, 0), self.screen.height - 1))


@dataclass
class ActionsResult:
    """What desktop.act did: `done` actions on the screen of size `screen`."""
    done: int
    screen: Size
    raw: Json = field(default_factory=dict, repr=False)

    @staticmethod
    def from_json(j: Json) -> "ActionsResult":
        s = j.get("screen") if isinstance(j.get("screen"), dict) else {}
        return ActionsResult(done=_int(j, "done"),
                             screen=Size(_int(s or {}, "width"), _int(s or {}, "height")), raw=j)


# --- computer-use actions (desktop.act; docs/api.md, "Desktop") -----------------------------
# x and y are the screen's pixels (a scaled screenshot's via Screenshot.to_screen). Each has
# to_json(), the action as berthd takes it; a plain dict in that shape works as well.

MouseButton = Literal["left", "middle", "right"]
Point = Tuple[int, int]


def _at(j: Json, x: Optional[int], y: Optional[int]) -> Json:
    if x is not None:
        j["x"] = x
    if y is not None:
        j["y"] = y
    return j


@dataclass
class Move:
    """The pointer to (x, y)."""
    x: int
    y: int

    def to_json(self) -> Json:
        return {"type": "move", "x": self.x, "y": self.y}


@dataclass
class Click:
    """A click (count 2: double, 3: triple), at (x, y) or where the pointer is (an earlier
    action of the same batch must have put it somewhere)."""
    x: Optional[int] = None
    y: Optional[int] = None
    button: MouseButton = "left"
    count: int = 1

    def to_json(self) -> Json:
        return _at({"type": "click", "button": self.button, "count": self.count}, self.x, self.y)


@dataclass
class MouseDown:
    x: Optional[int] = None
    y: Optional[int] = None
    button: MouseButton = "left"

    def to_json(self) -> Json:
        return _at({"type": "mouse_down", "button": self.button}, self.x, self.y)


@dataclass
class MouseUp:
    x: Optional[int] = None
    y: Optional[int] = None
    button: MouseButton = "left"

    def to_json(self) -> Json:
        return _at({"type": "mouse_up", "button": self.button}, self.x, self.y)


@dataclass
class Drag:
    """Down at the first point, through the rest, up at the last (2-100 points)."""
    path: Sequence[Point]
    button: MouseButton = "left"

    def to_json(self) -> Json:
        return {"type": "drag", "path": [list(p) for p in self.path], "button": self.button}


@dataclass
class Scroll:
    """Wheel notches at (x, y): dy > 0 down, dx > 0 right (each -50..50)."""
    x: Optional[int] = None
    y: Optional[int] = None
    dy: int = 0
    dx: int = 0

    def to_json(self) -> Json:
        return _at({"type": "scroll", "dy": self.dy, "dx": self.dx}, self.x, self.y)


@dataclass
class TypeText:
    """Text as keystrokes on the guest's en-us map: printable ASCII, newline and tab (anything
    else belongs on the clipboard)."""
    text: str

    def to_json(self) -> Json:
        return {"type": "type", "text": self.text}


@dataclass
class Key:
    """A key or a combination: "Return", "ctrl+c", "ctrl+shift+t", "alt+F4"."""
    keys: str

    def to_json(self) -> Json:
        return {"type": "key", "keys": self.keys}


@dataclass
class HoldKey:
    """A key or combination held for ms (at most 10 000)."""
    keys: str
    ms: int

    def to_json(self) -> Json:
        return {"type": "hold_key", "keys": self.keys, "ms": self.ms}


@dataclass
class Wait:
    """A pause of ms (at most 10 000; 30 000 in all per batch)."""
    ms: int

    def to_json(self) -> Json:
        return {"type": "wait", "ms": self.ms}


Action = Union[Move, Click, MouseDown, MouseUp, Drag, Scroll, TypeText, Key, HoldKey, Wait]
