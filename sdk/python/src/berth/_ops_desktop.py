"""The desktop ops (docs/api.md, "Desktop"): screenshots, computer-use actions, the guest's
clipboard, who controls the desktop's input, and viewer tickets. Actions are checked here as
berthd's parser (controller/desktop/rfb_input.cc) checks them, with its limits, so that a batch
berthd would refuse is refused before anything is sent; only the screen's bounds are left to
berthd (it alone knows the screen's size). So is the clipboard's text (a str of at most 1 MiB
of UTF-8)."""

from __future__ import annotations

import json
import time
from typing import Any, List, Optional, Sequence, Union

from ._core import CoreBase, Deadline, Op, Request
from .errors import ConflictError, InternalError, InvalidArgumentError, TimeoutError
from .types import (Action, ActionsResult, DesktopControl, DesktopTicket, Json, Screenshot,
                    Size, WorkspaceInfo)

# berthd's limits (controller/desktop/rfb_input.h, agent_hands.h).
MAX_ACTIONS = 200
MAX_TYPED_TEXT = 10_000   # characters typed per batch
MAX_PAUSE_MS = 10_000     # one wait or hold_key
MAX_PAUSES_MS = 30_000    # all of a batch's
MAX_DRAG_POINTS = 100
MAX_NOTCHES = 50
MAX_KEYS_LENGTH = 64
MIN_SCALE = 0.05
MAX_CLIPBOARD = 1 << 20   # bytes of UTF-8 either way (controller/desktop/clipboard.h)
#: Seconds berthd holds one ?wait=change at most; between two, the SDK asks whether the
#: workspace still runs (berthd ends a wait early when the workspace stops; a wait begun on
#: a stopped one runs its course).
CONTROL_WAIT_STEP = 20
#: The states in which a desktop's control may still change.
_LIVE = ("creating", "starting", "running")

_MODIFIERS = {"ctrl": "ctrl", "control": "ctrl", "shift": "shift", "alt": "alt", "option": "alt",
              "meta": "meta", "super": "meta", "win": "meta", "cmd": "meta", "command": "meta"}
_NAMED_KEYS = {"enter", "return", "tab", "esc", "escape", "backspace", "delete", "del", "insert",
               "home", "end", "pageup", "page_up", "pagedown", "page_down", "left", "up", "right",
               "down", "arrowleft", "arrowup", "arrowright", "arrowdown", "space", "capslock",
               "menu", "print", "printscreen"}
_TYPES = ("move, click, mouse_down, mouse_up, drag, scroll, type, key, hold_key, wait")


def _bad(index: int, what: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"action {index}: {what}", code="invalid_argument")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _named_key(name: str) -> bool:
    if len(name) == 1:
        return 0x20 <= ord(name) <= 0x7E
    lower = name.lower()
    if lower in _NAMED_KEYS or lower in _MODIFIERS:
        return True
    return (2 <= len(lower) <= 3 and lower[0] == "f" and lower[1:].isdigit()
            and lower[1:].isascii() and 1 <= int(lower[1:]) <= 12)


def check_keys(keys: str) -> Optional[str]:
    """Why berthd would refuse a key combination ("ctrl+shift+t"), or None."""
    if not 1 <= len(keys.encode()) <= MAX_KEYS_LENGTH:
        return f"'keys' is 1 to {MAX_KEYS_LENGTH} characters"
    if keys == "+":
        rest, last = "", "+"
    elif len(keys) >= 2 and keys.endswith("++"):
        rest, last = keys[:-2], "+"
    else:
        rest, _, last = keys.rpartition("+")
    if rest:
        for part in rest.split("+"):
            if part.lower() not in _MODIFIERS:
                return f"'{part.lower()}' in '{keys}' is not a modifier (ctrl, shift, alt, meta)"
    if not _named_key(last):
        return f"unknown key '{last}' in '{keys}'"
    return None


class _Checker:
    """berthd's checks of a batch (rfb_input.cc, Compiler::Add), without the screen."""

    def __init__(self) -> None:
        self.has_position = False
        self.typed = 0
        self.paused = 0

    def point(self, index: int, x: Any, y: Any) -> None:
        if not _is_int(x) or not _is_int(y):
            raise _bad(index, "x and y are whole pixels")
        if x < 0 or y < 0 or x > 0xFFFF or y > 0xFFFF:
            raise _bad(index, f"({x}, {y}) is off the screen")

    def maybe_move(self, index: int, a: Json, required: bool = False) -> None:
        if "x" not in a and "y" not in a and not required:
            return
        if "x" not in a or "y" not in a:
            raise _bad(index, "needs both x and y")
        self.point(index, a["x"], a["y"])
        self.has_position = True

    def need_position(self, index: int) -> None:
        if not self.has_position:
            raise _bad(index, "the pointer has no position yet: give x and y")

    def pair(self, index: int, p: Any) -> None:
        if not isinstance(p, (list, tuple)) or len(p) != 2:
            raise _bad(index, "a point is [x, y]")
        self.point(index, p[0], p[1])

    def pause(self, index: int, a: Json) -> None:
        ms: Any = a.get("ms")
        if not _is_int(ms) or not 0 <= ms <= MAX_PAUSE_MS:
            raise _bad(index, f"'ms' is 0 to {MAX_PAUSE_MS}")
        self.paused += ms
        if self.paused > MAX_PAUSES_MS:
            raise _bad(index, f"a request pauses at most {MAX_PAUSES_MS} ms in all")

    def add(self, index: int, a: Any) -> None:
        if not isinstance(a, dict) or not isinstance(a.get("type"), str):
            raise _bad(index, 'an action is an object with a "type"')
        kind = a["type"]
        if "button" in a and a["button"] not in ("left", "middle", "right"):
            raise _bad(index, "'button' is left, middle or right")
        if kind == "move":
            self.maybe_move(index, a, required=True)
        elif kind == "click":
            if "count" in a and (not _is_int(a["count"]) or not 1 <= a["count"] <= 3):
                raise _bad(index, "'count' is 1, 2 or 3")
            self.maybe_move(index, a)
            self.need_position(index)
        elif kind in ("mouse_down", "mouse_up"):
            self.maybe_move(index, a)
            self.need_position(index)
        elif kind == "drag":
            if "path" in a:
                path = a["path"]
                if not isinstance(path, (list, tuple)) or not 2 <= len(path) <= MAX_DRAG_POINTS:
                    raise _bad(index, f"'path' is 2 to {MAX_DRAG_POINTS} points [x, y]")
                for p in path:
                    self.pair(index, p)
            else:
                if "from" not in a or "to" not in a:
                    raise _bad(index, "a drag needs 'path', or 'from' and 'to'")
                self.pair(index, a["from"])
                self.pair(index, a["to"])
            self.has_position = True
        elif kind == "scroll":
            self.maybe_move(index, a)
            self.need_position(index)
            for axis in ("dy", "dx"):
                if axis in a and (not _is_int(a[axis]) or abs(a[axis]) > MAX_NOTCHES):
                    raise _bad(index, f"'{axis}' is a whole number of notches, -{MAX_NOTCHES} "
                                      f"to {MAX_NOTCHES}")
        elif kind == "type":
            text = a.get("text")
            if not isinstance(text, str):
                raise _bad(index, "'text' is a string")
            self.typed += len(text.encode())
            if self.typed > MAX_TYPED_TEXT:
                raise _bad(index, f"at most {MAX_TYPED_TEXT} characters are typed per request")
            for i, c in enumerate(text):
                if c not in "\n\t" and not 0x20 <= ord(c) <= 0x7E:
                    raise _bad(index, f"character U+{ord(c):04X} (at {i}) is not on the guest's "
                                      "keyboard map (en-us: printable ASCII, newline and tab); "
                                      "put it on the clipboard with set_clipboard(text) and "
                                      "press key 'ctrl+v'")
        elif kind in ("key", "hold_key"):
            keys = a.get("keys")
            if not isinstance(keys, str):
                raise _bad(index, "'keys' is a string, e.g. \"ctrl+c\"")
            why = check_keys(keys)
            if why:
                raise _bad(index, why)
            if kind == "hold_key":
                self.pause(index, a)
        elif kind == "wait":
            self.pause(index, a)
        else:
            raise _bad(index, f"unknown type '{kind}' ({_TYPES})")


def actions_body(actions: Union[Action, Json, Sequence[Union[Action, Json]]]) -> Json:
    """The request body for `actions` (typed actions or dicts in berthd's shape), checked as
    berthd checks it: InvalidArgumentError, naming the action by its index, for anything it
    would refuse (but a point off the screen, which it alone can tell)."""
    items: List[Any]
    if isinstance(actions, dict) and "type" not in actions and "actions" in actions:
        actions = actions["actions"]  # berthd's own body shape
    if isinstance(actions, (list, tuple)):
        items = list(actions)
    else:
        items = [actions]
    wire = [a.to_json() if hasattr(a, "to_json") else a for a in items]
    if not 1 <= len(wire) <= MAX_ACTIONS:
        raise InvalidArgumentError(f"'actions' is a list of 1 to {MAX_ACTIONS} actions "
                                   f"(not {len(wire)})", code="invalid_argument")
    checker = _Checker()
    for i, a in enumerate(wire):
        checker.add(i, a)
    return {"actions": wire}


def clipboard_body(text: Any) -> Json:
    """The body of PUT …/desktop/clipboard, checked as berthd checks it: a str of at most
    MAX_CLIPBOARD bytes of UTF-8 (InvalidArgumentError, nothing sent)."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"the clipboard's text is a str, not {type(text).__name__}",
                                   code="invalid_argument")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(f"the clipboard's text is not valid Unicode (a lone surrogate "
                                   f"at {e.start})", code="invalid_argument") from None
    if size > MAX_CLIPBOARD:
        raise InvalidArgumentError(f"the clipboard takes at most {MAX_CLIPBOARD} bytes of UTF-8, "
                                   f"not {size}", code="too_large")
    return {"text": text}


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

    def desktop_wait_change(self, ws: str, revision: Optional[int], timeout: float,
                            deadline: Deadline) -> Op[DesktopControl]:
        """GET …/desktop/control?wait=change&revision=N, asked again (at most CONTROL_WAIT_STEP
        s each) until the state's revision is not `revision` (None: the current one, read
        first) or `timeout` seconds passed: the state then, whichever came first. Each request
        fits in `deadline` (TimeoutError when it runs out first). Between two waits the
        workspace is read: ConflictError once it is not running (stopping, stopped,
        hibernated, error), NotFoundError once it is deleted."""
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
                not 0 <= timeout < float("inf"):
            raise InvalidArgumentError(f"timeout is a number of seconds, not {timeout!r}",
                                       code="invalid_argument")
        if revision is not None and (not _is_int(revision) or revision < 0):
            raise InvalidArgumentError(f"revision is a DesktopControl's revision (an int >= 0), "
                                       f"not {revision!r}", code="invalid_argument")
        end = time.monotonic() + timeout
        path = self.ws_path(ws, "/desktop/control")
        if revision is None:
            first = yield from self.desktop_control(ws, None, deadline)
            revision = first.revision
        what = f"wait for a change of the desktop control of {ws} (revision {revision})"
        while True:
            budget = end - time.monotonic()
            room = deadline.remaining()
            if room is not None:
                budget = min(budget, room - 1.0)  # a second for berthd's answer
            seconds = max(0, min(CONTROL_WAIT_STEP, int(budget)))
            j = yield from self.call(Request("GET", path, what,
                                             params=[("wait", "change"), ("revision", str(revision)),
                                                     ("timeout", f"{seconds}s")],
                                             replayable=True), deadline)
            state = DesktopControl.from_json(j)
            if "revision" not in j:
                raise InternalError(f"{what}: the answer has no 'revision' (a berthd without "
                                    "?wait=change)")
            if state.revision != revision:
                return state
            # No change within berthd's wait: is there still a desktop to change?
            info = WorkspaceInfo.from_json((yield from self.call(
                Request("GET", self.ws_path(ws), f"workspace {ws}", replayable=True), deadline)))
            if info.state not in _LIVE:
                raise ConflictError(f"{what}: workspace {info.name} is {info.state}"
                                    + (f" ({info.error})" if info.error else ""),
                                    code="failed_precondition")
            if end - time.monotonic() < 1.0:
                return state  # the caller's timeout: the state, unchanged
            left = deadline.remaining()
            if seconds == 0 or (left is not None and left <= 1.0):
                raise TimeoutError(f"{what}: request_timeout ({deadline.seconds:g} s) ran out "
                                   f"before timeout ({timeout:g} s)", code="deadline_exceeded")

    def desktop_takeover(self, ws: str, private: bool, reason: Optional[str],
                         lease: Optional[int], deadline: Deadline) -> Op[DesktopControl]:
        body: Json = {"private": private}
        if reason is not None:
            body["reason"] = reason
        if lease is not None:
            body["lease_s"] = lease
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

    def desktop_request_human(self, ws: str, reason: str, timeout: Optional[float],
                              deadline: Deadline) -> Op[DesktopControl]:
        """POST …/desktop/control/request: with `timeout` (seconds, at most 3600) berthd answers
        once a person took over and handed back, or at the timeout (the request is then
        withdrawn), with `answered` and `url`."""
        if not isinstance(reason, str):
            raise InvalidArgumentError("reason is a string", code="invalid_argument")
        body: Json = {"reason": reason}
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
                    not 0 < timeout <= 3600:
                raise InvalidArgumentError(f"timeout is 1-3600 seconds, not {timeout!r}",
                                           code="invalid_argument")
            body["timeout_s"] = max(1, int(timeout))
        # Not sent again on its own: a second request after a hand-back would be a new one.
        j = yield from self.call(Request("POST", self.ws_path(ws, "/desktop/control/request"),
                                         f"request a person for the desktop of {ws}", json=body),
                                 deadline)
        return DesktopControl.from_json(j)

    def desktop_withdraw_request(self, ws: str, deadline: Deadline) -> Op[DesktopControl]:
        j = yield from self.call(Request("DELETE", self.ws_path(ws, "/desktop/control/request"),
                                         f"withdraw the request for a person on {ws}",
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

    def desktop_screenshot(self, ws: str, format: str, scale: float, quality: Optional[int],
                           deadline: Deadline) -> Op[Screenshot]:
        """GET …/desktop/screenshot: the image with the screen's and the image's sizes (its
        headers). LockedError during a private takeover."""
        if format not in ("png", "jpeg"):
            raise InvalidArgumentError(f"format is png or jpeg, not {format!r}",
                                       code="invalid_argument")
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or \
                not MIN_SCALE <= scale <= 1.0:
            raise InvalidArgumentError(f"scale is a number from {MIN_SCALE} to 1, not {scale!r}",
                                       code="invalid_argument")
        params = [("format", format)]
        if scale != 1.0:
            params.append(("scale", repr(float(scale))))
        if quality is not None:
            if not _is_int(quality) or not 1 <= quality <= 100:
                raise InvalidArgumentError(f"quality is 1 to 100, not {quality!r}",
                                           code="invalid_argument")
            params.append(("quality", str(quality)))
        what = f"screenshot of {ws}"
        reply = yield from self.send(Request("GET", self.ws_path(ws, "/desktop/screenshot"), what,
                                             params=params, replayable=True), deadline)
        sizes = []
        for name in ("x-screen-width", "x-screen-height", "x-image-width", "x-image-height"):
            v = reply.headers.get(name, "")
            if not v.isdigit():
                raise InternalError(f"{what}: the answer has no {name} header")
            sizes.append(int(v))
        ctype = reply.headers.get("content-type", "")
        return Screenshot(data=reply.data, format="jpeg" if "jpeg" in ctype else "png",
                          screen=Size(sizes[0], sizes[1]), image=Size(sizes[2], sizes[3]))

    def desktop_actions(self, ws: str, actions: Union[Action, Json, Sequence[Union[Action, Json]]],
                        deadline: Deadline) -> Op[ActionsResult]:
        """POST …/desktop/actions, checked first (actions_body). Never sent again on its own (a
        click twice is not a click). LockedError while a person holds control."""
        body = actions_body(actions)
        j = yield from self.call(Request("POST", self.ws_path(ws, "/desktop/actions"),
                                         f"desktop actions on {ws}", json=body), deadline)
        return ActionsResult.from_json(j)

    def desktop_clipboard(self, ws: str, deadline: Deadline) -> Op[str]:
        """GET …/desktop/clipboard: the guest's clipboard as text ("" when it holds none).
        LockedError during someone else's private takeover; ConflictError for an image without the
        desktop's clipboard tool; UnavailableError while its display is not up."""
        what = f"clipboard of {ws}"
        j = yield from self.call(Request("GET", self.ws_path(ws, "/desktop/clipboard"), what,
                                         replayable=True), deadline)
        text = j.get("text") if isinstance(j, dict) else None
        if not isinstance(text, str):
            raise InternalError(f"{what}: the answer has no 'text'")
        return text

    def desktop_set_clipboard(self, ws: str, text: str, deadline: Deadline) -> Op[int]:
        """PUT …/desktop/clipboard, checked first (clipboard_body): the bytes put there.
        Setting the same text twice leaves the same clipboard, so it may be sent again.
        LockedError while a person holds control (unless this key is theirs)."""
        body = clipboard_body(text)
        what = f"set the clipboard of {ws}"
        # As UTF-8, not \u escapes (httpx's json= escapes all but ASCII): a text of 1 MiB of
        # UTF-8 must fit berthd's request body limit, which escapes would multiply by up to 3.
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        j = yield from self.call(Request("PUT", self.ws_path(ws, "/desktop/clipboard"), what,
                                         content=content,
                                         headers={"Content-Type": "application/json"},
                                         replayable=True), deadline)
        n = j.get("bytes") if isinstance(j, dict) else None
        if not isinstance(n, int) or isinstance(n, bool):
            raise InternalError(f"{what}: the answer has no 'bytes'")
        return n

    def desktop_cdp_url(self, ws: str) -> str:
        return self.config.url + self.ws_path(ws, "/desktop/cdp")
