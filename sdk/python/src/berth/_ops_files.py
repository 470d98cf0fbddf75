"""The file and preview ops (the agent's files API through berthd; berthd's previews)."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union
from urllib.parse import quote, urlsplit

from ._core import (STREAM_IDLE_TIMEOUT, Abort, Adopt, Blocking, Close, CoreBase, Deadline, Emit,
                    LineSplitter, Op, Request, Sleep, StopToken, UploadBody, _maybe_await,
                    file_path, parse_json)
from ._tar import DirExtract, DirTar
from .errors import BerthError, InvalidArgumentError, NotFoundError, TimeoutError, UnavailableError
from .types import DirTransfer, EntryInfo, Json, Preview, WatchEvent


class FileOps(CoreBase):

    def _file_req(self, method: str, ws: str, path: str, what: str, user: Optional[str],
                  params: Optional[List[Tuple[str, str]]] = None, **kw: Any) -> Request:
        ps = list(params or [])
        if user:
            ps.append(("user", user))
        return Request(method, self.ws_path(ws, "/files" + file_path(path)), f"{what} {path}",
                       params=ps, **kw)

    def read_file(self, ws: str, path: str, user: Optional[str], deadline: Deadline) -> Op[bytes]:
        reply = yield from self.send(self._file_req("GET", ws, path, "read", user,
                                                    replayable=True), deadline)
        return reply.data

    def stat(self, ws: str, path: str, user: Optional[str], deadline: Deadline) -> Op[EntryInfo]:
        j = yield from self.call(self._file_req("GET", ws, path, "stat", user, [("stat", "1")],
                                                replayable=True), deadline)
        return EntryInfo.from_json(j)

    def exists(self, ws: str, path: str, user: Optional[str], deadline: Deadline) -> Op[bool]:
        try:
            yield from self.stat(ws, path, user, deadline)
        except NotFoundError:
            return False
        return True

    def list_dir(self, ws: str, path: str, user: Optional[str],
                 deadline: Deadline) -> Op[List[EntryInfo]]:
        j = yield from self.call(self._file_req("GET", ws, path, "list", user, replayable=True),
                                 deadline)
        if not isinstance(j, dict) or not isinstance(j.get("entries"), list):
            raise InvalidArgumentError(f"{path} is not a directory", code="invalid_argument")
        return [EntryInfo.from_json(e) for e in j["entries"] if isinstance(e, dict)]

    def upload(self, ws: str, path: str, source: Any, user: Optional[str], mode: Optional[int],
               deadline: Deadline) -> Op[EntryInfo]:
        """PUT, streamed: Content-Length when the size is known (bytes, a seekable file),
        chunked otherwise. The agent writes a temporary file and renames it into place, so a
        PUT may be sent again (a seekable file is rewound)."""
        params = [("mode", format(mode, "04o"))] if mode is not None else []
        body = UploadBody(source)
        headers = {"Content-Type": "application/octet-stream"}
        if body.length is not None:
            headers["Content-Length"] = str(body.length)
        req = self._file_req("PUT", ws, path, "upload", user, params, body=body, headers=headers,
                             replayable=True)
        reply = yield from self.send(req, deadline)
        return EntryInfo.from_json(parse_json(reply.data, req.what))

    def download(self, ws: str, path: str, user: Optional[str], sink: Any, deadline: Deadline,
                 idle: float = STREAM_IDLE_TIMEOUT) -> Op[int]:
        """GET, streamed: each chunk is emitted (sink None) or written to `sink`. The bytes."""
        req = self._file_req("GET", ws, path, "download", user, stream=True, replayable=True)
        reply = yield from self.send(req, deadline, idle)
        total = 0
        while True:
            chunk = yield from self.read(reply.handle, deadline, idle, req.what)
            if not chunk:
                yield Close(reply.handle)
                return total
            total += len(chunk)
            if sink is None:
                yield Emit(chunk)
            else:
                yield Blocking(sink.write, (chunk,))

    def remove(self, ws: str, path: str, recursive: bool, user: Optional[str],
               deadline: Deadline) -> Op[None]:
        yield from self.call(self._file_req("DELETE", ws, path, "remove", user,
                                            [("recursive", "1")] if recursive else [],
                                            replayable=True), deadline)

    def rename(self, ws: str, old: str, new: str, user: Optional[str],
               deadline: Deadline) -> Op[EntryInfo]:
        file_path(new)
        j = yield from self.call(self._file_req("POST", ws, old, "rename", user,
                                                [("op", "move"), ("to", new)]), deadline)
        return EntryInfo.from_json(j)

    def make_dir(self, ws: str, path: str, user: Optional[str], deadline: Deadline) -> Op[bool]:
        reply = yield from self.send(self._file_req("POST", ws, path, "make_dir", user,
                                                    [("op", "mkdir"), ("parents", "1")],
                                                    replayable=True), deadline)
        return reply.status == 201


    # -- watching ----------------------------------------------------------------------------

    def watch_open(self, ws: str, path: str, recursive: bool, user: Optional[str],
                   deadline: Deadline) -> Op[Any]:
        """GET ?watch=1: answers the open NDJSON stream (a missing path or a file is an error
        here, at once) for watch_follow to adopt."""
        params = [("watch", "1")] + ([("recursive", "1")] if recursive else [])
        req = self._file_req("GET", ws, path, "watch", user, params, stream=True, detach=True,
                             replayable=True)
        reply = yield from self.send(req, deadline, STREAM_IDLE_TIMEOUT)
        return reply.handle

    def watch_follow(self, ws: str, path: str, handle: Any, token: StopToken, on_event: Any,
                     on_exit: Any) -> Op[None]:
        """Hands each change to `on_event` until stop() (quietly), the directory's removal
        (quietly, after its "deleted" event), or the stream breaking (UnavailableError: the
        workspace stopped) or going quiet past the idle limit (TimeoutError). on_exit gets
        None or that error, which the op then raises."""
        yield Adopt(handle)
        what = f"watch {path} in {ws}"
        splitter = LineSplitter(what)
        error: Optional[BaseException] = None
        try:
            while not token.stopped:
                try:
                    data = yield from self.read(handle, Deadline(None), STREAM_IDLE_TIMEOUT, what)
                except BerthError:
                    if token.stopped:
                        break
                    raise
                if not data:
                    break
                for ev in splitter.feed(data):
                    if ev.get("type") == "keepalive":
                        continue
                    if token.stopped:
                        break
                    yield from _maybe_await(on_event(WatchEvent.from_json(ev)))
        except UnavailableError as e:
            error = UnavailableError(f"{what}: the stream broke (did the workspace stop?): "
                                     f"{e.message}", code="unavailable")
        except BaseException as e:  # noqa: BLE001 - handed to on_exit, raised below
            error = e
        if on_exit is not None and not isinstance(error, GeneratorExit):
            yield from _maybe_await(on_exit(error))
        if error is not None:
            raise error

    def watch_stop(self, token: StopToken) -> Op[None]:
        token.stopped = True
        if token.handle is not None:
            yield Abort(token.handle)

    # -- directories as tar ------------------------------------------------------------------

    def upload_dir(self, ws: str, local_dir: str, remote_dir: str, user: Optional[str],
                   deadline: Deadline) -> Op[DirTransfer]:
        """PUT ?archive=tar with the tar of local_dir made as it is sent; the agent extracts
        it as it arrives (remote_dir made with its parents)."""
        file_path(remote_dir)
        tar = yield Blocking(DirTar, (local_dir,))
        req = self._file_req("PUT", ws, remote_dir, "upload_dir", user, [("archive", "tar")],
                             body=UploadBody(tar),
                             headers={"Content-Type": "application/x-tar"})
        j = yield from self.call(req, deadline)
        return DirTransfer(entries=int(j.get("entries", tar.entries)),
                           bytes=int(j.get("bytes", tar.bytes)), skipped=tar.skipped)

    def download_dir(self, ws: str, remote_dir: str, local_dir: str, user: Optional[str],
                     deadline: Deadline) -> Op[DirTransfer]:
        """GET ?archive=tar, extracted into local_dir chunk by chunk as it arrives."""
        req = self._file_req("GET", ws, remote_dir, "download_dir", user, [("archive", "tar")],
                             stream=True, replayable=True)
        reply = yield from self.send(req, deadline, STREAM_IDLE_TIMEOUT)
        # Made once the workspace answers: a missing remote_dir leaves nothing behind here.
        out = yield Blocking(DirExtract, (local_dir,))
        while True:
            chunk = yield from self.read(reply.handle, deadline, STREAM_IDLE_TIMEOUT, req.what)
            if not chunk:
                break
            yield Blocking(out.feed, (chunk,))
        yield Close(reply.handle)
        yield Blocking(out.finish, ())
        return DirTransfer(entries=out.entries, bytes=out.bytes, skipped=out.skipped)


class PreviewOps(CoreBase):

    def create_preview(self, ws: str, port: int, public: bool,
                       expires_in: Union[None, int, str], deadline: Deadline) -> Op[Preview]:
        body: Json = {"port": port, "public": public}
        if expires_in is not None:
            body["expires_in"] = expires_in
        j = yield from self.call(Request("POST", self.ws_path(ws, "/previews"),
                                         f"preview of port {port} in {ws}", json=body), deadline)
        return Preview.from_json(j)

    def previews(self, ws: str, deadline: Deadline) -> Op[List[Preview]]:
        j = yield from self.call(Request("GET", self.ws_path(ws, "/previews"),
                                         f"previews of {ws}", replayable=True), deadline)
        return [Preview.from_json(p) for p in j.get("previews", []) if isinstance(p, dict)]

    def revoke_preview(self, ws: str, preview_id: str, deadline: Deadline) -> Op[Preview]:
        j = yield from self.call(Request(
            "DELETE", self.ws_path(ws, f"/previews/{quote(preview_id, safe='')}"),
            f"revoke preview {preview_id} of {ws}", replayable=True), deadline)
        return Preview.from_json(j)

    def get_host(self, ws: str, port: int, deadline: Deadline) -> Op[str]:
        """The preview host of `port` ("5173-web.preview.localhost:8420"), once something
        listens on it: berthd names it in GET …/ports. A server is usually started just before
        this is asked, so it is waited for (asking every 100 ms, then less often) rather than
        handed out before it can answer."""
        pause = 0.1
        while True:
            j = yield from self.call(Request("GET", self.ws_path(ws, "/ports"), f"ports of {ws}",
                                             replayable=True), deadline)
            for p in j.get("ports", []):
                if isinstance(p, dict) and p.get("port") == port and isinstance(
                        p.get("preview_url"), str):
                    return urlsplit(p["preview_url"]).netloc
            if not deadline.allows(pause):
                raise TimeoutError(f"nothing listens on port {port} in {ws} after "
                                   f"{deadline.seconds:g} s", code="deadline_exceeded")
            yield Sleep(pause)
            pause = min(pause * 2, 1.0)
