#!/usr/bin/env python3
"""End to end: preview links to a real VM (issue 13, "Tests").

One TCG guest of the base image, booted by berthd (guest network isolation on, as shipped):
  - the stock Vite app (tests/e2e/preview/app, its node_modules from the cache outside the
    clone) started with `npm run dev` on the guest's 127.0.0.1:5173 is opened in headless
    Chromium through the private link http://5173-<ws>.preview.localhost:<port>/?berth_preview_token=…:
    the token becomes a cookie and the address bar ends clean, the page renders, and a CSS edit
    made through berthd's files API shows in the page by Vite's HMR over the proxied WebSocket,
    with no reload
  - a server in the guest that records request headers sees no Berth credential (the API key,
    the token's header and cookie), its own cookie, Host localhost:PORT and X-Forwarded-*
  - a token for another port, a revoked and an expired token, another tenant's key: refused;
    hostile hosts (0080-…, +80-…, "80 -…", a trailing dot, a 64-character label) and smuggling
    (Content-Length with Transfer-Encoding, two Content-Lengths) are 400s
  - the workspace stopped: a request without a token is refused and it stays stopped; with
    the token it is woken (the timeline says a preview woke it)

Needs root, libvirt, the base image (built on first use), chromium and tests/browser's
packages (scripts/setup). Exit 0 PASS, 1 FAIL, 77 SKIP.

The edit waits until Vite itself logs that it sent the HMR update (vite_preview.edit_and_wait_for_vite,
one more write if its watcher stayed silent), and only then starts the browser's wait: a failure
says which half broke, the guest's file watcher or the update's way through the proxy. On a
failure it prints the dev server's output, the edited file and the guest's console.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
import npm_cache  # noqa: E402
import vite_preview  # noqa: E402
from berthd_harness import (AGENT, BERTHD, IMAGES_DATA, REPO, TEST_DISK_FLOOR, Api, Berthd, Failure,  # noqa: E402
                            accel, check, log, virsh)

T = "e2e_preview"
ECHO_PORT = 8000
# Answers every request with what it saw: method, target and headers, as JSON.
ECHO = r'''
import http.server, json
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"target": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H).serve_forever()
'''


def raw(port, request, timeout=60):
    """Sends request bytes to berthd as they are; (status, head lowercased, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request.encode() if isinstance(request, str) else request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    text = head.decode(errors="replace").lower()
    status = int(text.split(" ", 2)[1]) if text.startswith("http/1.1 ") else 0
    return status, text, body


def get(port, host, target="/", extra=""):
    return raw(port, f"GET {target} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n")


def main():
    if os.geteuid() != 0:
        print(f"SKIP {T}: needs root")
        return 77
    for binary in (BERTHD, AGENT):
        if not os.access(binary, os.X_OK):
            print(f"FAIL {T}: {binary} is missing (build first)")
            return 1
    t_start = time.monotonic()
    subprocess.run([f"{REPO}/images/lib/ensure-libvirt"], check=True)
    subprocess.run([f"{REPO}/images/build", "base", "--data", IMAGES_DATA, "--agent", AGENT], check=True)
    tarball = npm_cache.node_modules_tarball(vite_preview.APP_DIR)

    data = tempfile.mkdtemp(prefix="berthd-e2e-preview-", dir="/var/lib")
    os.chmod(data, 0o711)
    config = os.path.join(data, "config.json")
    with open(config, "w") as f:
        json.dump({"listen": "127.0.0.1:0", "data_dir": data, "images_dir": os.path.join(IMAGES_DATA, "images"),
                   "accel": accel(), "stop_grace_s": 30, "min_free_disk": TEST_DISK_FLOOR}, f)
    berthd = Berthd(data, config)
    ws = None
    try:
        url = berthd.start()
        port = int(url.rsplit(":", 1)[1])
        api = Api(url, open(os.path.join(data, "admin.key")).read().strip())
        log(f"berthd at {url}: {berthd.ran()}")
        ws = api.ok("POST", "/v1/workspaces", {"name": "pv"})["id"]
        api.wait(ws, "running")
        log(f"workspace running after {time.monotonic() - t_start:.0f} s")

        # --- Vite in the guest, HMR in Chromium through the private link ------------------------
        vite_preview.upload_app(api, ws, tarball)
        vite_preview.start_dev_server(api, ws, wait_s=420)
        grant = api.ok("POST", f"/v1/workspaces/{ws}/previews", {"port": 5173, "expires_in": "2h"})
        check(grant["url"] == f"http://5173-pv.preview.localhost:{port}/", f"preview url: {grant}")
        outcome = vite_preview.check_hmr(api, ws, grant["link"], load_timeout=300, hmr_timeout=120,
                                          confirm_sent=True)
        check(outcome["ok"] and outcome["exit_code"] == 0, f"HMR through the preview: {outcome}")
        final = outcome["ready_line"]["final_url"]
        check(final == grant["url"], f"the address bar shows {final}, not {grant['url']}")
        sockets = [w.get("url", "") for w in outcome.get("websockets", [])]
        check(any(u.startswith(f"ws://5173-pv.preview.localhost:{port}/") for u in sockets),
              f"Vite's WebSocket did not go through the preview: {sockets}")
        log(f"Vite page and HMR through the preview link: ok (Vite sent the update {outcome['vite_sent_s']} s "
            f"after the edit, the page showed it {outcome.get('hmr_ms')} ms later)")

        # --- what a guest server sees ----------------------------------------------------------
        api.ok("POST", f"/v1/workspaces/{ws}/exec",
               {"cmd": ["python3", "-c", ECHO], "user": "agent", "background": True, "tag": "echo"})
        deadline = time.monotonic() + 120
        while not vite_preview.listening(api, ws, ECHO_PORT):
            check(time.monotonic() < deadline, "the header-recording server did not listen")
            time.sleep(0.5)
        echo = api.ok("POST", f"/v1/workspaces/{ws}/previews", {"port": ECHO_PORT})
        token = echo["token"]
        host = f"{ECHO_PORT}-pv.preview.localhost:{port}"
        status, _, body = get(port, host, "/seen",
                              f"Authorization: Bearer {api.key}\r\nX-Berth-Preview-Token: {token}\r\n"
                              f"Cookie: berth_preview_token={token}; app=1\r\nX-Forwarded-For: 6.6.6.6\r\n")
        check(status == 200, f"the echo server through the preview: {status} {body[:300]!r}")
        seen = json.loads(body)
        text = json.dumps(seen)
        check(api.key not in text and token not in text, f"a Berth credential reached the guest: {text}")
        h = seen["headers"]
        check("authorization" not in h and "x-berth-preview-token" not in h, f"headers: {h}")
        check(h.get("cookie") == "app=1", f"the app's cookie: {h.get('cookie')}")
        check(h.get("host") == f"localhost:{ECHO_PORT}", f"Host: {h.get('host')}")
        check(h.get("x-forwarded-host") == host and h.get("x-forwarded-for") == "127.0.0.1", f"X-Forwarded-*: {h}")
        log("the guest server saw no Berth credential")

        # --- refusals --------------------------------------------------------------------------
        check(get(port, host, "/", f"X-Berth-Preview-Token: {grant['token']}\r\n")[0] == 403,
              "the 5173 token opened port 8000")
        other = api.ok("POST", "/v1/tenants", {"name": "other"})
        other_key = api.ok("POST", "/v1/keys", {"tenant": other["id"], "scope": "write"})["key"]
        # Its tenant has no such workspace: a 404, as the API answers for another tenant's workspace.
        status = get(port, host, "/", f"Authorization: Bearer {other_key}\r\n")[0]
        check(status == 404, f"another tenant's key: {status}, not 404")
        for bad in ("0" + host, "+" + host, f"{ECHO_PORT} -pv.preview.localhost", f"{ECHO_PORT}-pv.preview.localhost.",
                    f"{ECHO_PORT}-{'a' * 61}.preview.localhost"):
            status = get(port, bad, "/", f"X-Berth-Preview-Token: {token}\r\n")[0]
            check(status == 400, f"hostile host {bad!r}: {status}")
        for smuggled in (f"POST / HTTP/1.1\r\nHost: {host}\r\nX-Berth-Preview-Token: {token}\r\nContent-Length: 4\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                         f"POST / HTTP/1.1\r\nHost: {host}\r\nX-Berth-Preview-Token: {token}\r\nContent-Length: 4\r\n"
                         "Content-Length: 5\r\n\r\nabcde"):
            check(raw(port, smuggled)[0] == 400, f"smuggled request not refused: {smuggled!r}")
        api.ok("DELETE", f"/v1/workspaces/{ws}/previews/{echo['id']}")
        check(get(port, host, "/", f"X-Berth-Preview-Token: {token}\r\n")[0] == 401, "a revoked token still opens")
        expired = api.ok("POST", f"/v1/workspaces/{ws}/previews", {"port": ECHO_PORT})
        subprocess.run(["sqlite3", os.path.join(data, "berth.db"),
                        f"UPDATE previews SET expires_at = 1 WHERE id = '{expired['id']}';"], check=True, timeout=30)
        check(get(port, host, "/", f"X-Berth-Preview-Token: {expired['token']}\r\n")[0] == 401,
              "an expired token still opens")
        log("tokens for another port, revoked, expired, another tenant, hostile hosts, smuggling: refused")

        # --- a stopped workspace: no wake without a token, a wake with one -----------------------
        api.ok("POST", f"/v1/workspaces/{ws}/stop")
        api.wait(ws, "stopped", 300)
        app_host = f"5173-pv.preview.localhost:{port}"
        check(get(port, app_host)[0] == 401, "a request without a token was not refused")
        time.sleep(3)  # a wake would have begun by now
        check(api.ok("GET", f"/v1/workspaces/{ws}")["state"] == "stopped", "an unauthorised request woke it")
        status, head, _ = get(port, app_host, "/", f"X-Berth-Preview-Token: {grant['token']}\r\n")
        check(status == 503 and "retry-after:" in head, f"the wake answer: {status} {head}")
        api.wait(ws, "running")
        events = api.ok("GET", f"/v1/workspaces/{ws}/events?limit=1000")["events"]
        woken = [e for e in events if e["type"] == "woken" and "preview" in e.get("message", "")]
        check(woken, "the timeline does not say a preview woke it")
        log(f"woken by a preview: {woken[-1]['message']}")
        print(f"PASS {T} ({berthd.ran()}) in {time.monotonic() - t_start:.0f} s")
        return 0
    except (Failure, OSError, subprocess.SubprocessError, npm_cache.NpmCacheError, KeyError, ValueError) as e:
        print(f"FAIL {T} ({berthd.ran()}): {e}")
        if ws:
            for what, call in (("dev server output", lambda: vite_preview.process_output(api, ws, vite_preview.DEV_TAG)),
                               ("style.css in the guest", lambda: api.exec(ws, f"tail -c 300 {vite_preview.GUEST_APP}/src/style.css")),
                               ("inotify limits", lambda: api.exec(ws, "cat /proc/sys/fs/inotify/max_user_watches /proc/sys/fs/inotify/max_user_instances"))):
                try:
                    print(f"--- {what}:\n{call()}")
                except Exception as diag:  # noqa: BLE001 - diagnostics only
                    print(f"--- {what}: {diag}")
            subprocess.run(["tail", "-n", "40", os.path.join(data, "workspaces", ws, "console.log")])
        return 1
    finally:
        berthd.stop()
        if ws:
            virsh("destroy", f"berth-{ws}")
            virsh("undefine", f"berth-{ws}", "--managed-save", "--nvram")
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
