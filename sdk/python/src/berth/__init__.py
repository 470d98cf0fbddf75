"""Berth's Python SDK: a Linux VM per AI agent, on berthd's v1 API (docs/api.md).

    from berth import Workspace
    ws = Workspace.create(name="demo")          # BERTH_URL / BERTH_API_KEY from the environment
    print(ws.commands.run("uname -a").stdout)

Workspace blocks; AsyncWorkspace has the same methods, awaited."""

from ._core import (DEFAULT_COMMAND_TIMEOUT, DEFAULT_REQUEST_TIMEOUT, DEFAULT_WAIT_TIMEOUT,
                    STREAM_IDLE_TIMEOUT)
from .aworkspace import (AsyncCheckpoints, AsyncCheckpointScope, AsyncCommandHandle,
                         AsyncCommands, AsyncDesktop, AsyncFiles, AsyncNetwork, AsyncPreviews,
                         AsyncPty, AsyncPtyHandle, AsyncTemplates, AsyncWatchHandle,
                         AsyncWorkspace)
from .errors import (AlreadyExistsError, AuthError, BerthError, CommandExitError, ConflictError,
                     ForbiddenError, InternalError, InvalidArgumentError, LockedError,
                     NotFoundError, QuotaExceededError, RateLimitError, StorageError,
                     TemplateBuildError, TimeoutError, UnavailableError)
from .types import (Action, ActionsResult, Checkpoint, CheckpointDiff, Click, CommandResult,
                    DesktopControl, DesktopTicket, DiffCounts, DiffFiles, DiffPackages,
                    DirTransfer, Drag, EntryInfo, Event, FileChange, HoldKey, Key, MouseDown,
                    MouseUp, Move, NetworkStatus, PackageChange, Preview, ProcessInfo,
                    RestoreResult, Screenshot, Scroll, Size, Template, TypeText, Wait, WatchEvent,
                    WorkspaceInfo)
from .workspace import (Checkpoints, CheckpointScope, CommandHandle, Commands, Desktop, Files,
                        Network, Previews, Pty, PtyHandle, Templates, WatchHandle, Workspace)

__version__ = "0.1.0"
__all__ = [
    "Workspace", "AsyncWorkspace", "Commands", "AsyncCommands", "Files", "AsyncFiles",
    "Previews", "AsyncPreviews", "CommandHandle", "AsyncCommandHandle", "CommandResult",
    "EntryInfo", "Preview", "ProcessInfo", "WorkspaceInfo", "Pty", "AsyncPty", "PtyHandle",
    "AsyncPtyHandle", "WatchHandle", "AsyncWatchHandle", "Network", "AsyncNetwork", "Desktop",
    "AsyncDesktop", "WatchEvent", "DirTransfer", "NetworkStatus", "DesktopControl",
    "DesktopTicket", "Event", "Screenshot", "Size", "ActionsResult", "Action", "Move", "Click",
    "MouseDown", "MouseUp", "Drag", "Scroll", "TypeText", "Key", "HoldKey", "Wait", "BerthError", "AlreadyExistsError",
    "AuthError", "CommandExitError", "ConflictError", "ForbiddenError", "InternalError",
    "InvalidArgumentError", "LockedError", "NotFoundError", "QuotaExceededError",
    "RateLimitError", "StorageError", "TemplateBuildError", "TimeoutError", "UnavailableError",
    "DEFAULT_COMMAND_TIMEOUT", "DEFAULT_REQUEST_TIMEOUT", "DEFAULT_WAIT_TIMEOUT",
    "STREAM_IDLE_TIMEOUT", "Checkpoints", "AsyncCheckpoints", "CheckpointScope",
    "AsyncCheckpointScope", "Checkpoint", "RestoreResult", "CheckpointDiff", "DiffFiles",
    "DiffCounts", "DiffPackages", "FileChange", "PackageChange", "Templates", "AsyncTemplates",
    "Template",
]
