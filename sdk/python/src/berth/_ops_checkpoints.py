"""The checkpoint ops: a workspace's disks, and a running one's memory, kept and brought back
(docs/api.md, "Checkpoints")."""

from __future__ import annotations

from typing import List, Optional
from urllib.parse import quote

from ._core import Deadline, Op, Request
from ._ops_workspaces import WorkspaceOps
from .types import Checkpoint, CheckpointDiff, Json, RestoreResult


class CheckpointOps(WorkspaceOps):
    """On WorkspaceOps: a restore waits for the workspace with its wait_state."""

    def cp_path(self, ws: str, cp: str = "", rest: str = "") -> str:
        return self.ws_path(ws, "/checkpoints" + (f"/{quote(cp, safe='')}" if cp else "") + rest)

    def create_checkpoint(self, ws: str, name: Optional[str], memory: bool,
                          deadline: Deadline) -> Op[Checkpoint]:
        # Not sent again on its own: berthd takes no Idempotency-Key here, and a second
        # attempt after a lost answer would make a second checkpoint (or, named, a 409).
        body: Json = {}
        if name is not None:
            body["name"] = name
        if memory:
            body["memory"] = True
        j = yield from self.call(Request("POST", self.cp_path(ws), f"checkpoint {ws}", json=body),
                                 deadline)
        return Checkpoint.from_json(j)

    def checkpoints(self, ws: str, deadline: Deadline) -> Op[List[Checkpoint]]:
        j = yield from self.call(Request("GET", self.cp_path(ws), f"checkpoints of {ws}",
                                         replayable=True), deadline)
        return [Checkpoint.from_json(c) for c in j.get("checkpoints", []) if isinstance(c, dict)]

    def checkpoint(self, ws: str, cp: str, deadline: Deadline) -> Op[Checkpoint]:
        j = yield from self.call(Request("GET", self.cp_path(ws, cp), f"checkpoint {cp} of {ws}",
                                         replayable=True), deadline)
        return Checkpoint.from_json(j)

    def delete_checkpoint(self, ws: str, cp: str, deadline: Deadline) -> Op[Checkpoint]:
        j = yield from self.call(Request("DELETE", self.cp_path(ws, cp),
                                         f"delete checkpoint {cp} of {ws}", replayable=True),
                                 deadline)
        return Checkpoint.from_json(j)

    def diff_checkpoint(self, ws: str, cp: str, to: str, max_entries: Optional[int],
                        deadline: Deadline) -> Op[CheckpointDiff]:
        """GET …/checkpoints/{cp}/diff?to=&max_entries=: what changed from checkpoint `cp` to
        checkpoint `to`, or to the workspace now ("current"). The guest compares, so berthd
        starts a stopped or hibernated workspace first and the answer may take a boot and a walk
        of the file system: the caller's deadline is a long one. Replayable: it changes no
        state (a second attempt finds the workspace awake)."""
        params = [("to", to)]
        if max_entries is not None:
            params.append(("max_entries", str(max_entries)))
        j = yield from self.call(Request("GET", self.cp_path(ws, cp, "/diff"),
                                         f"diff of checkpoint {cp} of {ws} to {to}",
                                         params=params, replayable=True), deadline)
        return CheckpointDiff.from_json(j if isinstance(j, dict) else {})

    def restore_checkpoint(self, ws: str, cp: str, undo: bool, wait: bool,
                           deadline: Deadline) -> Op[RestoreResult]:
        """berthd answers once the disks are restored; a workspace that was running, or any
        restored to a checkpoint with memory, is then "starting" (booting, or resuming the
        checkpoint's memory), and with wait this waits (POST …/wait) until it runs. Not sent
        again on its own: a second restore would replace the undo checkpoint's state."""
        j = yield from self.call(Request("POST", self.cp_path(ws, cp, "/restore"),
                                         f"restore {ws} to {cp}", json={"undo": undo}), deadline)
        result = RestoreResult.from_json(j)
        if wait and result.workspace.state in ("starting", "creating"):
            result.workspace = yield from self.wait_state(result.workspace.id or ws, "running",
                                                          deadline)
        return result
