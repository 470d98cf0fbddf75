"""Deadlines and retries against stand-in servers on loopback (berthd answers 503 with
Retry-After only where a workspace wakes, which the unix transport does not show), and a
stream whose workspace stops."""

import http.server
import json
import threading
import time

import pytest

from berth import TimeoutError, UnavailableError, Workspace
from conftest import unique


class Stub:
    """An HTTP server answering from a script of (status, headers, body, delay) per request."""

    def __init__(self, script):
        self.script, self.seen, self.bodies = list(script), [], []
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def answer(self):
                if self.headers.get("Transfer-Encoding") == "chunked":
                    body = b""
                    while True:
                        size = int(self.rfile.readline().strip(), 16)
                        chunk = self.rfile.read(size + 2)[:size]
                        if size == 0:
                            break
                        body += chunk
                else:
                    body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                stub.bodies.append(body)
                stub.seen.append((self.command, self.path, dict(self.headers)))
                status, headers, body, delay = (stub.script.pop(0) if stub.script
                                                else (500, {}, {}, 0))
                time.sleep(delay)
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = answer

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


WS = {"id": "ws_0123456789abcdef", "name": "stub", "state": "running", "auto_start": True}
WAKING = (503, {"Retry-After": "1"}, {"error": {"code": "unavailable", "message": "waking"}}, 0)


def test_retry_after_is_waited_out_for_idempotent_calls_only():
    stub = Stub([WAKING, (200, {}, WS, 0)])
    try:
        t0 = time.monotonic()
        ws = Workspace.connect("stub", url=stub.url, api_key="k", request_timeout=10)
        assert ws.id == WS["id"] and 0.9 < time.monotonic() - t0 < 5
        assert [s[0] for s in stub.seen] == ["GET", "GET"]
        assert stub.seen[0][2]["Authorization"] == "Bearer k"
        # An exec is not idempotent: the 503 reaches the caller, marked retryable.
        stub.script[:] = [WAKING]
        with pytest.raises(UnavailableError) as e:
            ws.commands.run("true")
        assert e.value.status == 503 and e.value.retryable
        assert [s[0] for s in stub.seen[2:]] == ["POST"]
        # A create carries an Idempotency-Key, so it is sent again, with the same key.
        stub.script[:] = [WAKING, (201, {}, WS, 0)]
        Workspace.create(name="stub", url=stub.url, api_key="k", wait=False)
        keys = [s[2].get("Idempotency-Key") for s in stub.seen[3:]]
        assert len(keys) == 2 and keys[0] and keys[0] == keys[1]
        # An upload from a seekable file is sent again from its start; one from an iterator
        # (gone once sent) is not.
        import io
        entry = {"name": "f", "path": "/f", "type": "file", "size": 4, "mode": "0644"}
        stub.script[:] = [WAKING, (201, {}, entry, 0)]
        ws.files.upload("/f", io.BytesIO(b"data"))
        assert [s[0] for s in stub.seen[5:]] == ["PUT", "PUT"]
        assert stub.bodies[-1] == b"data" and stub.bodies[-2] == b"data"
        stub.script[:] = [WAKING]
        with pytest.raises(UnavailableError):
            ws.files.upload("/f", iter([b"da", b"ta"]))
        assert [s[0] for s in stub.seen[7:]] == ["PUT"]
        # A Retry-After longer than what is left of the deadline is not waited for.
        stub.script[:] = [(503, {"Retry-After": "5"}, {"error": {"code": "unavailable",
                                                                 "message": "x"}}, 0)]
        t0 = time.monotonic()
        with pytest.raises(UnavailableError):
            Workspace.connect("stub", url=stub.url, api_key="k", request_timeout=2)
        assert time.monotonic() - t0 < 1.5
    finally:
        stub.close()


def test_a_silent_server_ends_by_the_deadline():
    stub = Stub([(200, {}, WS, 30)])
    try:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError) as e:
            Workspace.connect("stub", url=stub.url, api_key="k", request_timeout=1.5)
        assert time.monotonic() - t0 < 4
        assert e.value.code == "deadline_exceeded" and e.value.status is None
        assert isinstance(e.value, __builtins__["TimeoutError"] if isinstance(
            __builtins__, dict) else __builtins__.TimeoutError)
    finally:
        stub.close()


def test_a_stream_ends_with_an_error_when_its_workspace_stops(berthd):
    ws = Workspace.create(name=unique("stopmid"))
    outcome = {}

    def run():
        t0 = time.monotonic()
        try:
            ws.commands.run("echo started; sleep 120", timeout=None,
                            on_stdout=lambda s: outcome.setdefault("started", time.monotonic()))
        except Exception as e:  # noqa: BLE001 - the test looks at what it is
            outcome["error"] = e
        outcome["took"] = time.monotonic() - t0

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 30
    while "started" not in outcome and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "started" in outcome
    other = Workspace.connect(ws.name)
    other.stop(force=True)
    stopped_at = time.monotonic()
    t.join(timeout=60)
    assert not t.is_alive()
    assert isinstance(outcome.get("error"), UnavailableError), outcome
    assert time.monotonic() - stopped_at < 10
