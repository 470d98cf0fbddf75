#!/usr/bin/env python3
"""The browser half of the preview e2e test (issue 13), checked on the host without a VM or
berthd: the stock Vite app (tests/e2e/preview/app) with the cached node_modules runs on the
host's Node, tests/browser/preview_hmr.mjs drives Debian's Chromium at it, and the edits are
made on disk. It proves that the driver passes only when HMR works:

  - direct: a CSS edit shows up by HMR over Vite's WebSocket (exit 0)
  - direct: a main.js edit makes Vite reload the page: reported reloaded, exit 1
  - the same app built and served statically (python3 -m http.server): the edit never shows,
    exit 1
  - through a stand-in for berthd's preview front (preview_front_stub.py) on
    5173-x.preview.localhost: a ?berth_preview_token= link becomes an HttpOnly cookie and a
    clean final URL, a "waking" page refreshes into the app, and HMR works over the proxied
    WebSocket, with the Host rewritten to localhost:5173 and with the browser's Host passed
    through (Vite allows every *.localhost name)
  - the same on a custom domain (5173-x.preview.example.com, resolved by Chromium to
    loopback): works with the Host rewritten; with the browser's Host passed through, Vite
    refuses it (403 "Blocked request", its allowedHosts check) and the driver says so

Needs node, Debian's chromium, tests/browser's packages (scripts/setup) and, the first time,
registry.npmjs.org (npm_cache). Exit 0 PASS, 1 FAIL.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
import npm_cache  # noqa: E402
import vite_preview  # noqa: E402
from berthd_harness import Failure, check, log  # noqa: E402
from preview_front_stub import PreviewFrontStub  # noqa: E402

T = "integration_preview_browser"
HMR_TIMEOUT = 30  # a working HMR takes well under a second here
NEGATIVE_HMR_TIMEOUT = 5  # how long a case that must fail waits for a change that never comes


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, what, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        check(proc.poll() is None, f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise Failure(f"{what} did not listen on {port} within {timeout_s} s")


def replace_atomically(path, text):
    """As the agent's PUT writes: a temporary file, then a rename over the old one."""
    tmp = f"{path}.berth-tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def css_edit_file(path):
    """An edit that adds the marker rule to the stylesheet at path."""
    original = open(path).read()
    return lambda marker: replace_atomically(path, vite_preview.css_with_marker(original, marker))


def css_edit(app):
    return css_edit_file(os.path.join(app, vite_preview.HMR_FILE))


def main_js_edit(app):
    path = os.path.join(app, "src", "main.js")
    original = open(path).read()
    check(vite_preview.MARKER_OLD in original, "main.js renders the old marker")
    return lambda marker: replace_atomically(path, original.replace(vite_preview.MARKER_OLD, marker))


def expect_pass(name, outcome):
    check(outcome["exit_code"] == 0 and outcome.get("ok"), f"{name}: {outcome}")
    check(outcome.get("saw_new") and not outcome.get("reloaded") and outcome.get("hmr_update_over_websocket"),
          f"{name}: passed without HMR? {outcome}")
    log(f"{name}: ok, HMR in {outcome.get('hmr_ms')} ms over {[w['url'] for w in outcome['websockets']]}")


def expect_fail(name, outcome, **fields):
    check(outcome["exit_code"] == 1 and not outcome.get("ok"), f"{name}: the driver did not fail: {outcome}")
    for k, v in fields.items():
        check(outcome.get(k) == v, f"{name}: {k} is {outcome.get(k)!r}, not {v!r}: {outcome}")
    log(f"{name}: failed as it must: {outcome.get('error')}")


def main():
    procs = []
    fronts = []
    work = tempfile.mkdtemp(prefix="preview-browser-")
    try:
        tarball = npm_cache.node_modules_tarball(vite_preview.APP_DIR)
        app = os.path.join(work, "app")
        shutil.copytree(vite_preview.APP_DIR, app, ignore=shutil.ignore_patterns("node_modules"))
        log(f"node_modules extracted in {npm_cache.extract_into(tarball, app):.2f} s")
        vite = os.path.join(app, "node_modules", "vite", "bin", "vite.js")

        # The static copy first, built before the dev server changes any source.
        dist = os.path.join(work, "dist")
        subprocess.run(["node", vite, "build", "--outDir", dist, "--logLevel", "warn"], cwd=app, check=True,
                       timeout=120)

        port = free_port()
        dev = subprocess.Popen(["node", vite, "--host", "127.0.0.1", "--port", str(port), "--strictPort"],
                               cwd=app, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
        procs.append(dev)
        wait_listening(port, dev, "vite")

        direct = f"http://127.0.0.1:{port}/"
        expect_pass("direct, CSS edit",
                    vite_preview.run_browser(direct, css_edit(app), hmr_timeout=HMR_TIMEOUT))
        expect_fail("direct, main.js edit",
                    vite_preview.run_browser(direct, main_js_edit(app), hmr_timeout=HMR_TIMEOUT),
                    saw_new=True, reloaded=True)
        # Back to the stock sources (Vite reloads nobody: no page is open).
        shutil.copy(os.path.join(vite_preview.APP_DIR, "src", "main.js"), os.path.join(app, "src", "main.js"))
        shutil.copy(os.path.join(vite_preview.APP_DIR, vite_preview.HMR_FILE),
                    os.path.join(app, vite_preview.HMR_FILE))

        static_port = free_port()
        static = subprocess.Popen([sys.executable, "-m", "http.server", "-b", "127.0.0.1", "-d", dist,
                                   str(static_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
        procs.append(static)
        wait_listening(static_port, static, "http.server")
        css = [f for f in os.listdir(os.path.join(dist, "assets")) if f.endswith(".css")]
        check(len(css) == 1, f"the build's CSS: {css}")
        expect_fail("static, CSS edit",
                    vite_preview.run_browser(f"http://127.0.0.1:{static_port}/",
                                             css_edit_file(os.path.join(dist, "assets", css[0])),
                                             hmr_timeout=NEGATIVE_HMR_TIMEOUT),
                    saw_new=False, reloaded=False)

        token = "t0k3n-" + vite_preview.new_marker()
        front = PreviewFrontStub(port, token, upstream_host="localhost:5173")
        fronts.append(front)
        url = f"http://5173-x.preview.localhost:{front.port}/"
        outcome = vite_preview.run_browser(f"{url}?berth_preview_token={token}", css_edit(app),
                                           hmr_timeout=HMR_TIMEOUT)
        expect_pass("front on preview.localhost, Host rewritten", outcome)
        ready = outcome["ready_line"]
        check(ready["final_url"] == url, f"the final URL keeps the token: {ready['final_url']}")
        check(ready["redirects"][:1] == [f"{url}?berth_preview_token={token}"], f"no 303 seen: {ready}")
        check([c["name"] for c in ready["cookies"]] == ["berth_preview"] and ready["cookies"][0]["httpOnly"],
              f"the cookie: {ready['cookies']}")
        statuses = [s for *_, s in front.seen]
        check(303 in statuses and 200 in statuses, f"no 303 or no waking page: {front.seen}")
        check(all(fwd == "localhost:5173" for _, _, _, fwd, s in front.seen if s == "piped"),
              f"a request reached the app with another Host: {front.seen}")
        check(any(t.startswith("/?token=") for _, t, _, _, s in front.seen if s == "piped"),
              f"the HMR WebSocket did not go through the front: {front.seen}")
        shutil.copy(os.path.join(vite_preview.APP_DIR, vite_preview.HMR_FILE),
                    os.path.join(app, vite_preview.HMR_FILE))

        front1 = PreviewFrontStub(port, token, upstream_host=None, waking_once=False)
        fronts.append(front1)
        expect_pass("front on preview.localhost, Host passed through",
                    vite_preview.run_browser(f"http://5173-x.preview.localhost:{front1.port}/?berth_preview_token={token}",
                                             css_edit(app), hmr_timeout=HMR_TIMEOUT))
        shutil.copy(os.path.join(vite_preview.APP_DIR, vite_preview.HMR_FILE),
                    os.path.join(app, vite_preview.HMR_FILE))

        custom = ["--map-to-loopback", "*.preview.example.com"]
        front2 = PreviewFrontStub(port, token, upstream_host="localhost:5173", waking_once=False)
        fronts.append(front2)
        url2 = f"http://5173-x.preview.example.com:{front2.port}/"
        expect_pass("front on a custom domain, Host rewritten",
                    vite_preview.run_browser(f"{url2}?berth_preview_token={token}", css_edit(app),
                                             hmr_timeout=HMR_TIMEOUT, extra_args=custom))
        shutil.copy(os.path.join(vite_preview.APP_DIR, vite_preview.HMR_FILE),
                    os.path.join(app, vite_preview.HMR_FILE))

        front3 = PreviewFrontStub(port, token, upstream_host=None, waking_once=False)
        fronts.append(front3)
        url3 = f"http://5173-x.preview.example.com:{front3.port}/"
        refused = vite_preview.run_browser(f"{url3}?berth_preview_token={token}", css_edit(app),
                                           load_timeout=NEGATIVE_HMR_TIMEOUT, extra_args=custom)
        expect_fail("front on a custom domain, Host passed through", refused, ready=False, status=403)
        check("Blocked request" in refused.get("page_text", ""), f"not Vite's refusal: {refused}")

        print(f"PASS {T}")
        return 0
    except (Failure, OSError, subprocess.SubprocessError, npm_cache.NpmCacheError, KeyError, ValueError) as e:
        print(f"FAIL {T}: {e}")
        return 1
    finally:
        for f in fronts:
            f.stop()
        for p in procs:  # each started in a session of its own: its group is its children too
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
