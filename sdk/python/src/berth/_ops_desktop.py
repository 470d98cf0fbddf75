"""The desktop ops: who controls the desktop's input, and viewer tickets (docs/api.md,
"Desktop"). Screenshots and input actions are not in berthd's API yet, so not here either."""

from __future__ import annotations

from typing import Optional

from ._core import CoreBase, Deadline, Op, Request
from .errors import InvalidArgumentError
from .types import DesktopControl, DesktopTicket, Json


class DesktopOps(CoreBase):

    def desktop_control(self, ws: str, wait_release: Optional[float],
                        deadline: Deadline) -> Op[DesktopControl]:
        """The control state; with wait_release (seconds, at most 3600) berthd answers when the
        agent holds control again or at that timeout, whichever is first."""
        params = []
        if wait_release is not None:
            if not 0 < wait_release <= 3600:
                raise InvalidArgumentError("wait_release is 1-3600 seconds",
                                           code="invalid_argument")
            params = [("wait", "release"), ("timeout", f"{max(1, int(wait_release))}s")]
        j = yield from self.call(Request("GET", self.ws_path(ws, "/desktop/control"),
                                         f"desktop control of {ws}", params=params,
                                         replayable=True), deadline)
        return DesktopControl.from_json(j)

    def desktop_takeover(self, ws: str, private: bool, reason: Optional[str],
                         deadline: Deadline) -> Op[DesktopControl]:
        body: Json = {"private": private}
        if reason is not None:
            body["reason"] = reason
        # Taking over again as the same key renews the lease: safe to send again.
        j = yield from self.call(Request("POST", self.ws_path(ws, "/desktop/control/takeover"),
                                         f"take over the desktop of {ws}", json=body,
                                         replayable=True), deadline)
        return DesktopControl.from_json(j)

    def desktop_release(self, ws: str, note: Optional[str],
                        deadline: Deadline) -> Op[DesktopControl]:
        body: Json = {} if note is None else {"note": note}
        j = yield from self.call(Request("POST", self.ws_path(ws, "/desktop/control/release"),
                                         f"release the desktop of {ws}", json=body,
                                         replayable=True), deadline)
        return DesktopControl.from_json(j)

    def desktop_ticket(self, ws: str, mode: str, deadline: Deadline) -> Op[DesktopTicket]:
        if mode not in ("view", "control"):
            raise InvalidArgumentError(f"a ticket's mode is view or control, not {mode!r}",
                                       code="invalid_argument")
        # Not sent again on its own: each answer is a different ticket.
        j = yield from self.call(Request("POST", self.ws_path(ws, "/desktop/tickets"),
                                         f"desktop ticket for {ws}", json={"mode": mode}),
                                 deadline)
        return DesktopTicket.from_json(j)
