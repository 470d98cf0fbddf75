"""Core: every op of the SDK, the mixins of _ops_*.py on CoreBase (_core.py)."""

from ._ops_checkpoints import CheckpointOps
from ._ops_commands import CommandOps
from ._ops_desktop import DesktopOps
from ._ops_events import EventOps
from ._ops_files import FileOps, PreviewOps
from ._ops_forks import ForkOps
from ._ops_network import NetworkOps
from ._ops_pty import PtyOps
from ._ops_templates import TemplateOps
from ._ops_workspaces import WorkspaceOps


class Core(ForkOps, CheckpointOps, WorkspaceOps, TemplateOps, CommandOps, PtyOps, FileOps,
           PreviewOps, NetworkOps, DesktopOps, EventOps):
    """Builds and interprets berthd's requests; the drivers (_sync.py, _async.py) run its
    ops."""
