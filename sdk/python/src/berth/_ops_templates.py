"""The template ops: a tenant's checkpoints with memory published under a name, or built by
berthd from a setup script (docs/api.md, "Templates"). A workspace is made from one with
POST /v1/workspaces {name, template} (WorkspaceOps.create)."""

from __future__ import annotations

from typing import List, Optional
from urllib.parse import quote

from ._core import CoreBase, Deadline, Op, Request, Sleep
from .errors import InvalidArgumentError, TemplateBuildError, TimeoutError
from .types import Json, Template

#: berthd's limit on a build when the request gives no timeout_s (docs/api.md, "Built from a
#: script"; seconds).
DEFAULT_BUILD_TIMEOUT = 1800.0
#: What a wait for a build allows beyond the build's timeout_s by default: berthd then still
#: checkpoints the built workspace's memory (a few GiB written to disk) and records the end.
BUILD_GRACE = 300.0
#: Polling GET /v1/templates/{tpl} while a build runs: the first pause, doubled up to the last
#: (a build boots a workspace and runs a script: seconds at best, usually minutes).
BUILD_POLL_FIRST = 0.5
BUILD_POLL_MAX = 5.0


def template_body(name: str, workspace: Optional[str], checkpoint: Optional[str],
                  script: Optional[str], start: Optional[str], ready: Optional[str],
                  image: Optional[str], size: Optional[str],
                  timeout_s: Optional[int]) -> Json:
    """POST /v1/templates's body: {name, from: {workspace, checkpoint?}} or {name, script, ...}
    with the fields given. Either form, never both nor neither (InvalidArgumentError, nothing
    sent): berthd would refuse them with a 400, and the SDK says which argument is wrong."""
    built = {"start": start, "ready": ready, "image": image, "size": size,
             "timeout_s": timeout_s}
    if workspace is not None and script is not None:
        raise InvalidArgumentError(
            "give either workspace (a template of its checkpoint) or script (a template berthd "
            "builds), not both", code="invalid_argument")
    if script is not None:
        if checkpoint is not None:
            raise InvalidArgumentError("checkpoint names a checkpoint of workspace: it does not "
                                       "go with script", code="invalid_argument")
        body: Json = {"name": name, "script": script}
        body.update({k: v for k, v in built.items() if v is not None})
        return body
    if workspace is None:
        raise InvalidArgumentError(
            "give workspace (and maybe checkpoint: a template of its checkpoint with memory) or "
            "script (a template berthd builds by running it in a new workspace)",
            code="invalid_argument")
    extra = [k for k, v in built.items() if v is not None]
    if extra:
        raise InvalidArgumentError(f"{', '.join(extra)} go with script, not with workspace",
                                   code="invalid_argument")
    source: Json = {"workspace": workspace}
    if checkpoint is not None:
        source["checkpoint"] = checkpoint
    return {"name": name, "from": source}


def build_deadline(body: Json) -> Deadline:
    """A create that waits for its build, without request_timeout: the build's own timeout_s
    (berthd's default without one) and BUILD_GRACE."""
    timeout = body.get("timeout_s")
    return Deadline((timeout if isinstance(timeout, int) else DEFAULT_BUILD_TIMEOUT)
                    + BUILD_GRACE)


class TemplateOps(CoreBase):

    @staticmethod
    def tpl_path(tpl: str = "") -> str:
        return "/v1/templates" + (f"/{quote(tpl, safe='')}" if tpl else "")

    def create_template(self, body: Json, wait: bool, deadline: Deadline) -> Op[Template]:
        """POST /v1/templates (a body of template_body). A build answers 202 "building"; with
        wait, GET …/{id} is then asked until it is not (wait_template), under the same
        deadline."""
        name = body.get("name", "")
        # Not sent again on its own: berthd takes no Idempotency-Key here; a second attempt
        # after a lost answer would meet the first one's name (a 409), would have taken a
        # second checkpoint first (without `checkpoint`), or started a second build.
        j = yield from self.call(Request("POST", self.tpl_path(), f"create template {name}",
                                         json=body), deadline)
        t = Template.from_json(j)
        if wait:
            t = yield from self.settle_template(t, t.id or name, deadline)
        return t

    def wait_template(self, tpl: str, deadline: Optional[Deadline]) -> Op[Template]:
        """The template once it is not "building": returned when it is ready, TemplateBuildError
        when it failed. Without a deadline: the template's own timeout_s (berthd ends every
        build by then) and BUILD_GRACE from now, the first GET under the default request
        timeout."""
        t = yield from self.template(tpl, deadline or self.deadline(None))
        if deadline is None:
            deadline = Deadline(float(t.timeout_s or DEFAULT_BUILD_TIMEOUT) + BUILD_GRACE)
        return (yield from self.settle_template(t, tpl, deadline))

    def settle_template(self, t: Template, tpl: str, deadline: Deadline) -> Op[Template]:
        # No event or long poll tells a build's end: GET (which carries the build_log), every
        # BUILD_POLL_FIRST s and then less often.
        pause = BUILD_POLL_FIRST
        while t.state == "building":
            if not deadline.allows(pause):
                raise TimeoutError(
                    f"template {t.name or tpl!r} is still building after {deadline.seconds:g} s "
                    "(request_timeout); berthd goes on with the build: wait for it again, or "
                    f"delete its workspace (template-{t.name or tpl}) to end it",
                    code="deadline_exceeded")
            yield Sleep(pause)
            pause = min(pause * 2, BUILD_POLL_MAX)
            t = yield from self.template(t.id or tpl, deadline)
        if t.state == "failed":
            raise TemplateBuildError(t)
        return t

    def templates(self, deadline: Deadline) -> Op[List[Template]]:
        j = yield from self.call(Request("GET", self.tpl_path(), "list templates",
                                         replayable=True), deadline)
        listed = j.get("templates") if isinstance(j, dict) else None
        return [Template.from_json(t) for t in (listed or []) if isinstance(t, dict)]

    def template(self, tpl: str, deadline: Deadline) -> Op[Template]:
        j = yield from self.call(Request("GET", self.tpl_path(tpl), f"template {tpl}",
                                         replayable=True), deadline)
        return Template.from_json(j)

    def delete_template(self, tpl: str, deadline: Deadline) -> Op[Template]:
        j = yield from self.call(Request("DELETE", self.tpl_path(tpl), f"delete template {tpl}",
                                         replayable=True), deadline)
        return Template.from_json(j)
