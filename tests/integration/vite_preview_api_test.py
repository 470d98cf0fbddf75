#!/usr/bin/env python3
"""tests/support/vite_preview.py against the real berthd API, without a VM: berthd on
--transport unix runs a real berth-agent per workspace as a host process, so the workspace's
"guest" is this host (its files in a temp directory, its commands as the caller, the host's
Node). Proves the helpers' assumptions about the API hold:

  - upload_app: the app and the cached node_modules tarball land through PUT ?archive=tar
    (symlinks in node_modules/.bin included: npm run dev finds vite)
  - start_dev_server: npm run dev as a background process; GET …/ports shows the port
  - check_hmr: the CSS edit made through GET/PUT …/files reaches the page by HMR, straight
    from the dev server and then through berthd's preview proxy on a custom preview domain
    (Chromium maps it to loopback): the private link's token becomes a cookie and leaves the
    address, Vite accepts the requests and its HMR WebSocket through the proxy
  - stop_dev_server: the server is gone from GET …/ports
  - a dev server that cannot start (no node_modules) fails at once with its output

Needs the berthd and berth-agent binaries (BERTHD_BIN, BERTH_AGENT_BIN), qemu-img, node,
chromium and tests/browser's packages. Exit 0 PASS, 1 FAIL.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import npm_cache  # noqa: E402
import vite_preview  # noqa: E402
from berthd_harness import AGENT, BERTHD, TEST_DISK_FLOOR, Api, Failure, check, log  # noqa: E402

T = "integration_vite_preview_api"
USER = "root" if os.getuid() == 0 else os.environ.get("USER", "")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stand_in_image(data):
    """The base image berthd wants to see; the unix transport boots nothing from it."""
    img = os.path.join(data, "images", "base", "v1")
    os.makedirs(img)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", os.path.join(img, "disk.qcow2"), "1G"],
                   check=True, timeout=60)
    for name, text in (("vmlinuz", ""), ("initrd.img", ""), ("image.json", "{}")):
        with open(os.path.join(img, name), "w") as f:
            f.write(text)
    os.symlink("v1", os.path.join(data, "images", "base", "current"))


PREVIEW_DOMAIN = "preview.example.com"  # not *.localhost: Vite refuses such a Host unless berthd rewrites it


def start_berthd(data, logf):
    config = os.path.join(data, "config.json")
    with open(config, "w") as f:
        json.dump({"preview": {"domain": PREVIEW_DOMAIN}, "min_free_disk": TEST_DISK_FLOOR}, f)
    proc = subprocess.Popen([BERTHD, "--config", config, "--listen", "127.0.0.1:0", "--data", data,
                             "--libvirt-uri", "test:///default",
                             "--transport", "unix", "--agent-bin", AGENT, "--agent-user", USER],
                            stdout=logf, stderr=logf)
    addr, key = os.path.join(data, "listen.addr"), os.path.join(data, "admin.key")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        check(proc.poll() is None, f"berthd exited with {proc.returncode}")
        if os.path.exists(addr) and os.path.exists(key) and open(addr).read().strip():
            return proc, Api(open(addr).read().strip(), open(key).read().strip())
        time.sleep(0.1)
    raise Failure("berthd did not write listen.addr and admin.key within 60 s")


def wait_port_closed(api, ws, port, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not vite_preview.listening(api, ws, port):
            return
        time.sleep(0.2)
    raise Failure(f"port {port} still listens {timeout_s} s after the dev server was stopped")


def stop(api, ws, berthd):
    """Deletes the workspace (which stops its agent: berthd leaves agents running otherwise)
    and stops berthd; its exit status. Safe to call twice."""
    if api and ws and berthd.poll() is None:
        status, _ = api.call("DELETE", f"/v1/workspaces/{ws}")
        deadline = time.monotonic() + 30
        while status < 400 and time.monotonic() < deadline:
            status, _ = api.call("GET", f"/v1/workspaces/{ws}")
            time.sleep(0.2)
    if berthd is None:
        return None
    if berthd.poll() is None:
        berthd.terminate()
        try:
            berthd.wait(timeout=30)
        except subprocess.TimeoutExpired:
            berthd.kill()
            berthd.wait()
    return berthd.returncode


def main():
    tmp = tempfile.mkdtemp(prefix="vite-preview-api-")
    data = os.path.join(tmp, "data")
    berthd, api, ws = None, None, None
    try:
        stand_in_image(data)
        berthd, api = start_berthd(data, open(os.path.join(tmp, "berthd.log"), "w"))
        ws = api.ok("POST", "/v1/workspaces", {"name": "vite"})["id"]
        api.wait(ws, "running", 60)
        app = os.path.join(tmp, "guest", "preview-app")

        uploaded = vite_preview.upload_app(api, ws, npm_cache.node_modules_tarball(vite_preview.APP_DIR),
                                           dest=app, user=USER)
        check(os.path.islink(os.path.join(app, "node_modules", ".bin", "vite")), "node_modules/.bin/vite is no symlink")
        check(os.path.isfile(os.path.join(app, "src", "main.js")), "the app's sources are missing")
        check(uploaded["entries"] > 100, f"few entries: {uploaded}")

        port = free_port()
        entries = vite_preview.start_dev_server(api, ws, app=app, port=port, user=USER, wait_s=60)
        check(entries[0]["address"] == "127.0.0.1", f"the dev server listens on {entries}")

        outcome = vite_preview.check_hmr(api, ws, f"http://127.0.0.1:{port}/", app=app, user=USER, hmr_timeout=30)
        check(outcome["ok"] and outcome["exit_code"] == 0, f"HMR through the files API: {outcome}")
        check("hmr update /src/style.css" in vite_preview.process_output(api, ws, vite_preview.DEV_TAG),
              "Vite did not log the HMR update")

        # Through berthd's preview proxy, by the private link a person would be handed.
        grant = api.ok("POST", f"/v1/workspaces/{ws}/previews", {"port": port})
        check(grant["url"].startswith(f"http://{port}-vite.{PREVIEW_DOMAIN}:"), f"preview url: {grant}")
        outcome = vite_preview.check_hmr(api, ws, grant["link"], app=app, user=USER, hmr_timeout=30,
                                         extra_args=["--map-to-loopback", f"*.{PREVIEW_DOMAIN}"])
        check(outcome["ok"] and outcome["exit_code"] == 0, f"HMR through the preview proxy: {outcome}")
        final = outcome["ready_line"]["final_url"]
        check(final == grant["url"], f"the address bar shows {final}, not the clean {grant['url']}")
        sockets = [w.get("url", "") for w in outcome.get("websockets", [])]
        check(any(u.startswith(f"ws://{port}-vite.{PREVIEW_DOMAIN}:") for u in sockets),
              f"the HMR WebSocket did not go through the preview: {sockets}")
        log(f"HMR through the preview proxy: {final}")

        vite_preview.stop_dev_server(api, ws)
        wait_port_closed(api, ws, port)

        shutil.rmtree(os.path.join(app, "node_modules"))
        try:
            vite_preview.start_dev_server(api, ws, app=app, port=port, tag="vite-broken", user=USER, wait_s=60)
            raise Failure("a dev server without node_modules was taken to listen")
        except Failure as e:
            check("exited" in str(e) and "vite" in str(e), f"the failure does not say why: {e}")
            log(f"a broken app fails at once: {str(e).splitlines()[0]}")
        # Under ASan (build-asan/) a leak or a report makes berthd's exit status non-zero.
        check(stop(api, ws, berthd) == 0, f"berthd exited with {berthd.returncode} (see its log)")
        print(f"PASS {T}")
        return 0
    except (Failure, OSError, subprocess.SubprocessError, npm_cache.NpmCacheError, KeyError, ValueError) as e:
        print(f"FAIL {T}: {e}")
        return 1
    finally:
        stop(api, ws, berthd)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
