"""The workspace ops: create, wait, wake, list, lifecycle (docs/api.md, "Workspaces")."""

from __future__ import annotations

import uuid
from typing import Dict, List, Optional, Union

from ._core import CoreBase, Deadline, Emit, Op, Request, Sleep, is_fork
from .errors import AlreadyExistsError, ConflictError, InternalError, NotFoundError, TimeoutError
from .types import Json, WorkspaceInfo


class WorkspaceOps(CoreBase):

    def get(self, ws: str, deadline: Deadline) -> Op[WorkspaceInfo]:
        j = yield from self.call(Request("GET", self.ws_path(ws), f"GET workspace {ws}",
                                         replayable=True), deadline)
        return WorkspaceInfo.from_json(j)

    def create(self, body: Json, wait: bool, deadline: Deadline) -> Op[WorkspaceInfo]:
        if is_fork(body):
            # berthd takes no Idempotency-Key for a fork (POST /v1/workspaces with "from" or
            # "template"): not sent again on its own, as a second attempt after a lost answer
            # would meet the first one's name (a 409) rather than its workspace.
            req = Request("POST", "/v1/workspaces", "fork workspace", json=body)
        else:
            # One key per create: a retry (ours after a broken connection, or berthd's 503)
            # answers the workspace the first attempt made, never a second one.
            req = Request("POST", "/v1/workspaces", "create workspace", json=body,
                          headers={"Idempotency-Key": "sdk-" + uuid.uuid4().hex},
                          replayable=True)
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
            yield from self.get(name, deadline)
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
