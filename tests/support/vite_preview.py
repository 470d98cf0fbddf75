"""The stock Vite app of the preview e2e test (issue 13) in a workspace, its dev server, and the
browser that checks HMR through a preview URL. Used by the e2e test with berthd_harness's Api:

    tarball = npm_cache.node_modules_tarball(vite_preview.APP_DIR)
    vite_preview.upload_app(api, ws, tarball)
    vite_preview.start_dev_server(api, ws)
    outcome = vite_preview.check_hmr(api, ws, f"http://5173-{ws}.preview.localhost:{port}/")
    check(outcome["ok"], outcome)

Every wait has a deadline; failures raise berthd_harness.Failure with what was seen.
"""

import io
import json
import os
import queue
import secrets
import subprocess
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from berthd_harness import REPO, Failure, check, log

APP_DIR = os.path.join(REPO, "tests", "e2e", "preview", "app")
DRIVER = os.path.join(REPO, "tests", "browser", "preview_hmr.mjs")
GUEST_APP = "/workspace/preview-app"
GUEST_USER = "agent"
DEV_PORT = 5173
DEV_TAG = "vite-dev"
# Text the stock app renders (src/main.js), and the file an edit can change without a reload:
# the template's only HMR-accepting module is its CSS (tests/e2e/preview/README.md).
MARKER_OLD = "Hello Vite!"
HMR_FILE = "src/style.css"
# Vite on Node 18 under TCG with 2 busy cores: well under a minute; a missing or broken
# node_modules fails at once (the process exits and the wait says so).
DEV_SERVER_WAIT_S = 180


def _request(api, method, path, data=None, headers=None, timeout=120):
    """A raw call on berthd's API: (status, body bytes). data may be bytes or a binary file
    (then give Content-Length in headers, so that urllib streams it without chunking)."""
    req = urllib.request.Request(api.url + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + api.key)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return res.status, res.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def files_path(ws, path, **query):
    """The files API route of an absolute guest path, with query parameters."""
    q = f"?{urllib.parse.urlencode(query)}" if query else ""
    return f"/v1/workspaces/{ws}/files{urllib.parse.quote(path)}{q}"


def _app_sources_tar(app_dir):
    """The app without node_modules (its sources are a few KiB) as tar bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(os.listdir(app_dir)):
            if name != "node_modules":
                tar.add(os.path.join(app_dir, name), arcname=name)
    return buf.getvalue()


def _put_tar(api, ws, dest, data, size, user, timeout):
    status, body = _request(api, "PUT", files_path(ws, dest, archive="tar", user=user), data=data,
                            headers={"Content-Type": "application/x-tar", "Content-Length": str(size)},
                            timeout=timeout)
    check(status == 200, f"PUT {dest}?archive=tar -> {status} {body[:300]!r}")
    return json.loads(body)


def upload_app(api, ws, node_modules_tar, app_dir=APP_DIR, dest=GUEST_APP, user=GUEST_USER, timeout=600):
    """Puts the app's sources and the node_modules tarball (npm_cache.node_modules_tarball)
    into dest in the workspace, as user, through PUT …/files/{dest}?archive=tar (the agent
    extracts as the stream arrives). Returns {"seconds", "bytes", "entries"}."""
    t0 = time.monotonic()
    sources = _app_sources_tar(app_dir)
    first = _put_tar(api, ws, dest, sources, len(sources), user, timeout)
    size = os.path.getsize(node_modules_tar)
    with open(node_modules_tar, "rb") as f:
        second = _put_tar(api, ws, dest, f, size, user, timeout)
    took = time.monotonic() - t0
    out = {"seconds": round(took, 2), "bytes": len(sources) + size,
           "entries": first.get("entries", 0) + second.get("entries", 0)}
    log(f"app uploaded to {ws}:{dest}: {out['bytes'] / 1e6:.1f} MB, {out['entries']} entries, {took:.1f} s")
    return out


def process_output(api, ws, tag, limit=4000):
    """The end of a process's buffered stdout and stderr, for a failure message."""
    status, body = _request(api, "GET", f"/v1/workspaces/{ws}/processes/{tag}/output", timeout=30)
    if status != 200:
        return f"(output: {status} {body[:200]!r})"
    text = []
    for line in body.decode(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("type") in ("stdout", "stderr"):
            text.append(event.get("data", ""))
    return "".join(text)[-limit:]


def listening(api, ws, port):
    """The GET …/ports entries for port (empty when nothing listens on it)."""
    answer = api.ok("GET", f"/v1/workspaces/{ws}/ports")
    return [p for p in answer.get("ports", []) if p.get("port") == port]


def start_dev_server(api, ws, app=GUEST_APP, port=DEV_PORT, tag=DEV_TAG, user=GUEST_USER,
                     wait_s=DEV_SERVER_WAIT_S):
    """Starts `npm run dev -- --host 127.0.0.1 --port PORT --strictPort` in app as a background
    process (tag), as user, and returns once the port listens (GET …/ports): the ports entries.
    Raises Failure with the server's output if it exits or does not listen within wait_s."""
    t0 = time.monotonic()
    body = {"cmd": ["npm", "run", "dev", "--", "--host", "127.0.0.1", "--port", str(port), "--strictPort"],
            "cwd": app, "user": user, "background": True, "tag": tag}
    started = api.ok("POST", f"/v1/workspaces/{ws}/exec", body)
    deadline = t0 + wait_s
    while time.monotonic() < deadline:
        entries = listening(api, ws, port)
        if entries:
            log(f"dev server (pid {started.get('pid')}) listens on {port} after {time.monotonic() - t0:.1f} s")
            return entries
        info = api.ok("GET", f"/v1/workspaces/{ws}/processes/{tag}")
        if info.get("status") != "running":
            raise Failure(f"the dev server exited ({info.get('exit_code')}) before listening on {port}:\n"
                          f"{process_output(api, ws, tag)}")
        time.sleep(0.5)
    raise Failure(f"port {port} did not listen within {wait_s} s:\n{process_output(api, ws, tag)}")


def stop_dev_server(api, ws, tag=DEV_TAG):
    """Kills the dev server's process (its process group). A server already gone is fine."""
    status, body = _request(api, "DELETE", f"/v1/workspaces/{ws}/processes/{tag}", timeout=60)
    check(status in (200, 202, 204, 404), f"DELETE processes/{tag} -> {status} {body[:200]!r}")


def new_marker():
    """A marker no page has yet."""
    return f"berth-hmr-{secrets.token_hex(6)}"


def css_with_marker(css, marker):
    """The stylesheet with a rule that renders marker after the app (and puts it in the CSSOM,
    where preview_hmr.mjs looks as well as in the text)."""
    return f'{css.rstrip()}\n\n#app::after {{ content: "{marker}"; }}\n'


def edit_css_through_api(api, ws, marker, app=GUEST_APP, user=GUEST_USER):
    """Adds the marker rule to the app's CSS through GET/PUT …/files (an atomic replace in the
    guest, which Vite's watcher sees as a change)."""
    path = f"{app}/{HMR_FILE}"
    status, css = _request(api, "GET", files_path(ws, path, user=user), timeout=60)
    check(status == 200, f"GET {path} -> {status} {css[:200]!r}")
    new = css_with_marker(css.decode(), marker).encode()
    status, body = _request(api, "PUT", files_path(ws, path, user=user), data=new,
                            headers={"Content-Type": "application/octet-stream"}, timeout=60)
    check(200 <= status < 300, f"PUT {path} -> {status} {body[:200]!r}")


class _Lines:
    """stdout lines of a child, read by a thread, so that each can be waited for with a deadline."""

    def __init__(self, stream):
        self.q = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream):
        for line in stream:
            self.q.put(line)
        self.q.put(None)

    def get(self, timeout):
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return None


def run_browser(url, edit, marker_old=MARKER_OLD, marker_new=None, load_timeout=60, hmr_timeout=60,
                extra_args=(), node="node"):
    """Runs preview_hmr.mjs on url: waits for the page, calls edit(marker_new) (which must change
    the app so that marker_new shows), tells the driver, and returns its outcome, the JSON of its
    last line plus "exit_code" and "ready_line". Raises Failure when the driver says nothing
    parseable in time; a failed check is an outcome with "ok": false, for the caller to assert."""
    marker_new = marker_new or new_marker()
    cmd = [node, DRIVER, url, marker_old, marker_new, "--load-timeout", str(load_timeout),
           "--hmr-timeout", str(hmr_timeout), *extra_args]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    errors = []
    threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True).start()
    lines = _Lines(proc.stdout)
    try:
        # The browser's start (a few seconds), then the driver's two waits of load_timeout each
        # (the navigation, then the marker).
        ready_wait = 2 * load_timeout + 60
        first = lines.get(timeout=ready_wait)
        if first is None:
            raise Failure(f"preview_hmr.mjs said nothing within {ready_wait} s: {''.join(errors)[-2000:]}")
        ready = json.loads(first)
        if not ready.get("ready"):
            proc.wait(timeout=30)
            ready["exit_code"] = proc.returncode
            return ready
        log(f"browser ready on {ready.get('final_url')}; editing (marker {marker_new})")
        edit(marker_new)
        proc.stdin.write("edited\n")
        proc.stdin.flush()
        last = lines.get(timeout=hmr_timeout + 60)
        if last is None:
            raise Failure(f"preview_hmr.mjs gave no outcome within {hmr_timeout + 60} s: {''.join(errors)[-2000:]}")
        outcome = json.loads(last)
        proc.wait(timeout=60)
        outcome["exit_code"] = proc.returncode
        outcome["ready_line"] = ready
        log(f"browser: ok={outcome.get('ok')} saw_new={outcome.get('saw_new')} "
            f"reloaded={outcome.get('reloaded')} in {outcome.get('hmr_ms')} ms; {outcome.get('error', '')}")
        return outcome
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# What Vite logs when its watcher saw a change of the CSS and it sent the update to its clients
# (Vite 6's updateModules; a pipe gets no colours). Without a client that loaded the CSS module
# it logs nothing.
VITE_SENT_UPDATE = f"hmr update /{HMR_FILE}"


def vite_updates_sent(api, ws, tag=DEV_TAG):
    """How many HMR updates of the CSS the dev server says it sent (its output, read through the
    processes API; Vite's output is a few KiB, well inside the agent's buffer)."""
    return process_output(api, ws, tag, limit=1 << 20).count(VITE_SENT_UPDATE)


def edit_and_wait_for_vite(api, ws, marker, app=GUEST_APP, user=GUEST_USER, tag=DEV_TAG,
                           watch_timeout=90):
    """edit_css_through_api, then waits until Vite says it sent the update. This separates the
    two halves of an HMR failure: Vite's file watcher in the guest (chokidar on inotify, slow
    under TCG) not seeing the write, and the update not crossing the preview proxy. A watcher
    that stays silent gets the same write once more (a second inotify event); silent again,
    it is a failure that names the guest side. Returns the seconds Vite took."""
    t0 = time.monotonic()
    before = vite_updates_sent(api, ws, tag)
    for attempt in (1, 2):
        edit_css_through_api(api, ws, marker, app, user)
        deadline = time.monotonic() + watch_timeout
        while time.monotonic() < deadline:
            if vite_updates_sent(api, ws, tag) > before:
                took = time.monotonic() - t0
                log(f"Vite sent the HMR update {took:.1f} s after the edit (write {attempt})")
                return took
            time.sleep(0.5)
        log(f"Vite's watcher did not report write {attempt} of {HMR_FILE} within {watch_timeout} s")
    raise Failure(f"the dev server never sent an HMR update for {HMR_FILE} after two writes through "
                  f"the files API ({2 * watch_timeout} s): its watcher in the guest missed them, "
                  f"before any proxy was involved. Its output:\n{process_output(api, ws, tag)}")


def check_hmr(api, ws, url, app=GUEST_APP, user=GUEST_USER, confirm_sent=False, **kwargs):
    """The whole browser check on a preview URL of the dev server in ws: the outcome of
    run_browser (kwargs are its own) with the edit made through berthd's files API. With
    confirm_sent, the edit also waits until Vite says it sent the update
    (edit_and_wait_for_vite), so that the driver's hmr_timeout measures the update's way to the
    page alone; the outcome's "vite_sent_s" says how long Vite took."""
    if not confirm_sent:
        return run_browser(url, lambda marker: edit_css_through_api(api, ws, marker, app, user), **kwargs)
    sent = {}

    def edit(marker):
        sent["s"] = round(edit_and_wait_for_vite(api, ws, marker, app, user), 1)

    outcome = run_browser(url, edit, **kwargs)
    outcome["vite_sent_s"] = sent.get("s")
    return outcome
