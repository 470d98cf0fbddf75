"""A stand-in for berthd's preview front, for checking the browser half of the preview e2e test
on the host before berthd serves previews (tests/integration/preview_browser_test.py).

It does what issue 13 asks of the access path, no more: a `?berth_preview_token=` query is
answered 303 to the same URL without it, setting an HttpOnly, host-only, SameSite cookie; a
request without the cookie is a 401; the first navigation with it gets a "waking" page that
refreshes itself; the rest is forwarded to the app with the cookie removed and the Host either
rewritten to a fixed value (`upstream_host`) or passed through (None), then piped both ways, so
WebSocket upgrades work. One request per connection (upstream gets Connection: close unless it
is an upgrade): each request passes the check. Not a proxy to ship: no bodies beyond what the
pipe carries, GET-shaped traffic only, loopback only.
"""

import asyncio
import threading
import urllib.parse

COOKIE = "berth_preview"
MAX_HEAD = 16 * 1024


class PreviewFrontStub:
    def __init__(self, app_port, token, upstream_host, waking_once=True):
        self.app_port, self.token, self.upstream_host = app_port, token, upstream_host
        self.waking_left = 1 if waking_once else 0
        self.seen = []  # (method, target, Host as received, Host as forwarded, status or "piped")
        self.port = None
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()
        if not self._started.wait(10):
            raise RuntimeError("the preview front stub did not start")

    def _run(self):
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._started.set()
        self._loop.run_forever()

    def stop(self):
        self._loop.call_soon_threadsafe(self._loop.stop)

    async def _answer(self, writer, status, headers, body=b""):
        lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", "Connection: close", *headers]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        await writer.drain()
        writer.close()

    async def _serve(self, reader, writer):
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError):
            writer.close()
            return
        if len(head) > MAX_HEAD:
            await self._answer(writer, "431 Request Header Fields Too Large", [])
            return
        request_line, *header_lines = head.decode("latin-1").split("\r\n")[:-2]
        method, target, _ = request_line.split(" ", 2)
        headers = [tuple(h.split(":", 1)) for h in header_lines if ":" in h]
        get = lambda name: next((v.strip() for k, v in headers if k.lower() == name), "")  # noqa: E731
        host = get("host")
        url = urllib.parse.urlsplit(target)
        query = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        cookies = dict(c.strip().split("=", 1) for c in get("cookie").split(";") if "=" in c)

        if any(k == "berth_preview_token" for k, _ in query):
            if dict(query)["berth_preview_token"] != self.token:
                self.seen.append((method, target, host, None, 401))
                await self._answer(writer, "401 Unauthorized", [], b"bad token")
                return
            rest = urllib.parse.urlencode([(k, v) for k, v in query if k != "berth_preview_token"])
            location = url.path + (f"?{rest}" if rest else "")
            self.seen.append((method, target, host, None, 303))
            await self._answer(writer, "303 See Other", [
                f"Location: {location}",
                f"Set-Cookie: {COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Lax"])
            return
        if cookies.get(COOKIE) != self.token:
            self.seen.append((method, target, host, None, 401))
            await self._answer(writer, "401 Unauthorized", [], b"no preview token")
            return
        if self.waking_left > 0 and "text/html" in get("accept"):
            self.waking_left -= 1
            self.seen.append((method, target, host, None, 200))
            await self._answer(writer, "200 OK", ["Content-Type: text/html", "Cache-Control: no-store"],
                               b'<!doctype html><meta http-equiv="refresh" content="1">'
                               b"<p>Waking your workspace</p>")
            return

        upgrade = get("upgrade") != ""
        forwarded_host = self.upstream_host or host
        out = [request_line]
        for k, v in headers:
            name = k.lower()
            if name == "host":
                v = " " + forwarded_host
            elif name == "cookie":
                kept = [c for c in v.split(";") if c.strip() and not c.strip().startswith(COOKIE + "=")]
                if not kept:
                    continue
                v = ";".join(kept)
            elif name == "connection" and not upgrade:
                continue
            out.append(f"{k}:{v}")
        if not upgrade:
            out.append("Connection: close")
        self.seen.append((method, target, host, forwarded_host, "piped"))
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.app_port)
        except OSError:
            await self._answer(writer, "502 Bad Gateway", [], b"app not listening")
            return
        up_writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    @staticmethod
    async def _pipe(src, dst):
        try:
            while True:
                data = await src.read(65536)
                if not data:
                    break
                dst.write(data)
                await dst.drain()
        except ConnectionError:
            pass
        finally:
            try:
                dst.close()
            except RuntimeError:
                pass
