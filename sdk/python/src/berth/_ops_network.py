"""The network ops: a workspace's egress policy (docs/api.md, "Network")."""

from __future__ import annotations

from typing import List, Optional

from ._core import CoreBase, Deadline, Op, Request
from .errors import InvalidArgumentError
from .types import Json, NetworkStatus

EGRESS = ("open", "none", "allowlist")


class NetworkOps(CoreBase):

    def network(self, ws: str, deadline: Deadline) -> Op[NetworkStatus]:
        j = yield from self.call(Request("GET", self.ws_path(ws, "/network"), f"network of {ws}",
                                         replayable=True), deadline)
        return NetworkStatus.from_json(j)

    def set_network(self, ws: str, egress: Optional[str], allow: Optional[List[str]],
                    deadline: Deadline) -> Op[NetworkStatus]:
        """PATCH: the whole policy is replaced (allow alone means allowlist). Idempotent: the
        same policy twice is the same policy."""
        if egress is not None and egress not in EGRESS:
            raise InvalidArgumentError(f"egress is one of {', '.join(EGRESS)}, not {egress!r}",
                                       code="invalid_argument")
        if isinstance(allow, str):
            raise InvalidArgumentError("allow is a list of names and CIDRs, not a string",
                                       code="invalid_argument")
        body: Json = {}
        if egress is not None:
            body["egress"] = egress
        if allow is not None:
            body["allow"] = list(allow)
        if not body:
            raise InvalidArgumentError("set egress=, allow=, or both", code="invalid_argument")
        j = yield from self.call(Request("PATCH", self.ws_path(ws, "/network"),
                                         f"set network of {ws}", json=body, replayable=True),
                                 deadline)
        return NetworkStatus.from_json(j)
