"""The fork ops: new workspaces from a checkpoint of another (docs/api.md, "Forks"). A fork of
a workspace as it is now, or from a template, is POST /v1/workspaces with "from" or "template"
(WorkspaceOps.create)."""

from __future__ import annotations

import uuid
from typing import Dict, List, Optional

from ._core import Deadline, Op, Request
from ._ops_checkpoints import CheckpointOps
from .types import Json, WorkspaceInfo


class ForkOps(CheckpointOps):

    def fork_checkpoint(self, ws: str, cp: str, name: Optional[str], count: int,
                        labels: Optional[Dict[str, str]], wait: bool,
                        deadline: Deadline) -> Op[List[WorkspaceInfo]]:
        """POST …/checkpoints/{cp}/fork: `count` new workspaces (berthd names them
        <name>-1 … <name>-<count>, or <name> for one), each "creating"; with wait, waited for
        one after the other until each runs (they boot at once; a fork that does not take its
        new identity ends in error: ConflictError). Not sent again on its own: berthd takes no
        Idempotency-Key here, and a second attempt would meet the first one's names. No name:
        one is made up, as for a create."""
        body: Json = {"name": name or "ws-" + uuid.uuid4().hex[:10]}
        if count != 1:
            body["count"] = count
        if labels is not None:
            body["labels"] = labels
        j = yield from self.call(Request("POST", self.cp_path(ws, cp, "/fork"),
                                         f"fork checkpoint {cp} of {ws}", json=body), deadline)
        listed = j.get("workspaces") if isinstance(j, dict) else None
        forks = [WorkspaceInfo.from_json(w) for w in (listed or []) if isinstance(w, dict)]
        if wait:
            for i, info in enumerate(forks):
                if info.state != "running":
                    forks[i] = yield from self.wait_state(info.id, "running", deadline)
        return forks
