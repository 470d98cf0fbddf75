"""The timeline ops (docs/api.md, "The timeline"): a workspace's events, a page at a time or
followed live (GET …/events?follow=1, an NDJSON stream with keepalive lines)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import List, Optional, Sequence, Tuple, Union

from ._core import (STREAM_IDLE_TIMEOUT, CoreBase, Deadline, Emit, LineSplitter, Op, Request)
from .errors import InvalidArgumentError
from .types import Event, Json

#: berthd answers at most this many events a page (?limit= 1..1000).
MAX_EVENT_PAGE = 1000

Filter = Union[None, str, Sequence[str]]
Since = Union[None, str, int, float, datetime]


def _join(name: str, value: Filter) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    items = list(value)
    if not all(isinstance(x, str) for x in items):
        raise InvalidArgumentError(f"{name} is a string or a list of strings",
                                   code="invalid_argument")
    return ",".join(items) if items else None


def format_since(since: Since) -> Optional[str]:
    """`since` as berthd takes it: a datetime as ISO 8601 UTC with Z (whole seconds; a naive
    one is taken as UTC), a number as unix seconds, a string as it is."""
    if since is None:
        return None
    if isinstance(since, datetime):
        if since.tzinfo is None:
            since = since.replace(tzinfo=timezone.utc)
        return since.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(since, bool):
        raise InvalidArgumentError("since is a datetime, unix seconds or an ISO 8601 string",
                                   code="invalid_argument")
    if isinstance(since, (int, float)):
        return str(int(since))
    if isinstance(since, str):
        return since
    raise InvalidArgumentError("since is a datetime, unix seconds or an ISO 8601 string",
                               code="invalid_argument")


def event_params(type: Filter, actor: Filter, since: Since, after: int,
                 limit: int) -> List[Tuple[str, str]]:
    """The query of GET …/events: `type` and `actor` comma-joined when given as lists."""
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise InvalidArgumentError(f"after is an event id (0 or more), not {after!r}",
                                   code="invalid_argument")
    if isinstance(limit, bool) or not isinstance(limit, int) or \
            not 1 <= limit <= MAX_EVENT_PAGE:
        raise InvalidArgumentError(f"limit is 1 to {MAX_EVENT_PAGE}, not {limit!r}",
                                   code="invalid_argument")
    params = [("after", str(after)), ("limit", str(limit))]
    for key, value in (("type", _join("type", type)), ("actor", _join("actor", actor)),
                       ("since", format_since(since))):
        if value:
            params.append((key, value))
    return params


def _is_keepalive(line: Json) -> bool:
    # As common/v1/events.cc FollowLineFromJson: an object with "type": "keepalive" alone.
    return len(line) == 1 and line.get("type") == "keepalive"


class EventOps(CoreBase):

    def events(self, ws: str, params: List[Tuple[str, str]],
               deadline: Deadline) -> Op[List[Event]]:
        j = yield from self.call(Request("GET", self.ws_path(ws, "/events"), f"events of {ws}",
                                         params=params, replayable=True), deadline)
        items = j.get("events") if isinstance(j, dict) else None
        return [Event.from_json(e) for e in items or [] if isinstance(e, dict)]

    def follow_events(self, ws: str, params: List[Tuple[str, str]],
                      deadline: Deadline) -> Op[None]:
        """Emits every event after `after` (the backlog, then live ones) until the caller
        closes the iterator or berthd ends the stream (the workspace was deleted). `deadline`
        bounds opening the stream; then only the idle limit applies (keepalives every 15 s)."""
        what = f"follow events of {ws}"
        req = Request("GET", self.ws_path(ws, "/events"), what,
                      params=params + [("follow", "1")],
                      headers={"Accept": "application/x-ndjson"}, replayable=True, stream=True)
        reply = yield from self.send(req, deadline, STREAM_IDLE_TIMEOUT)
        splitter = LineSplitter(what)
        while True:
            data = yield from self.read(reply.handle, Deadline(None), STREAM_IDLE_TIMEOUT, what)
            if not data:
                return
            for line in splitter.feed(data):
                if not _is_keepalive(line):
                    yield Emit(Event.from_json(line))
