"""A small harness for driving the real berthd binary from Python: start it on a fresh data
directory, talk to its HTTP API with the standard library, kill it. Shared by the end-to-end
test (tests/e2e/berthd/) and the benchmark (bench/run-berthd-bench)."""

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BERTHD = os.environ.get("BERTHD_BIN", os.path.join(REPO, "build/controller/berthd"))
AGENT = os.environ.get("BERTH_AGENT_BIN", os.path.join(REPO, "build/guest-agent/berth-agent"))
IMAGES_DATA = os.environ.get("BERTH_DATA", "/var/lib/berth")
# The disk floor of every test berthd (config "min_free_disk"): new disks are refused only below
# 1 GiB free. berthd's default (5 GiB and 5 %) is for hosts berthd owns; a CI machine shares a
# large disk (250 GB) of which a few percent may be free, and its tests create small disks.
TEST_DISK_FLOOR = {"bytes": 1 << 30, "percent": 0}
BOOT_WAIT = 900  # seconds: two TCG boots at once on 2 cores, with a retry, fit in this


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


class Api:
    def __init__(self, url, key):
        self.url, self.key = url, key

    def call(self, method, path, body=None, timeout=120, headers=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.key)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as res:
                raw = res.read()
                return res.status, (json.loads(raw) if raw.strip() else None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, {"raw": raw.decode(errors="replace")}

    def ok(self, method, path, body=None, timeout=120):
        status, answer = self.call(method, path, body, timeout)
        check(200 <= status < 300, f"{method} {path} -> {status} {answer}")
        return answer

    def exec(self, ws, cmd, user=None, timeout_s=120):
        body = {"cmd": cmd, "timeout_ms": timeout_s * 1000}
        if user:
            body["user"] = user
        return self.ok("POST", f"/v1/workspaces/{ws}/exec", body, timeout=timeout_s + BOOT_WAIT)

    def wait(self, ws, state, timeout_s=BOOT_WAIT):
        t0 = time.monotonic()
        answer = self.ok("POST", f"/v1/workspaces/{ws}/wait",
                         {"state": state, "timeout_s": timeout_s}, timeout=timeout_s + 30)
        return answer, time.monotonic() - t0

    def events(self, ws):
        return [e["type"] for e in self.ok("GET", f"/v1/workspaces/{ws}/events?limit=1000")["events"]]


class Berthd:
    def __init__(self, data, config, prefix=()):
        # prefix: a command berthd runs under (setpriv, to take a capability away).
        self.data, self.config, self.proc, self.prefix = data, config, None, list(prefix)
        self.health = None  # the last start's GET /v1/health: what runs the guests

    def ran(self):
        """What ran the guests, as berthd said at its last start: "accel tcg, transport forward".
        The e2e tests print it on their PASS and FAIL lines, so a log says what was tested."""
        if not self.health:
            return "accel ?, transport ? (berthd did not start)"
        return f"accel {self.health.get('accel', '?')}, transport {self.health.get('transport', '?')}"

    def start(self):
        addr = os.path.join(self.data, "listen.addr")
        if os.path.exists(addr):
            os.unlink(addr)
        logf = open(os.path.join(self.data, "berthd.log"), "ab")
        self.proc = subprocess.Popen([*self.prefix, BERTHD, "--config", self.config], stdout=logf, stderr=logf)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            check(self.proc.poll() is None, f"berthd exited with {self.proc.returncode}")
            if os.path.exists(addr) and open(addr).read().strip():
                url = open(addr).read().strip()
                try:
                    raw = urllib.request.urlopen(url + "/v1/health", timeout=5).read()
                    self.health = json.loads(raw)
                    return url
                except (OSError, ValueError):
                    pass
            time.sleep(0.1)
        raise Failure("berthd did not start listening")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def virsh(*args):
    return subprocess.run(["virsh", "-c", "qemu:///system", *args], capture_output=True, text=True)


def our_domains(ids):
    names = virsh("list", "--all", "--name").stdout.split()
    return sorted(n for n in names if n.startswith("berth-ws_") and n[len("berth-"):] in ids)


def accel():
    if os.environ.get("BERTH_ACCEL"):
        return "kvm" if os.environ["BERTH_ACCEL"] == "kvm" else "tcg"
    out = subprocess.run(["bash", "-c", f"source {REPO}/images/lib/common.sh && berth_accel"],
                         capture_output=True, text=True).stdout.strip()
    return "kvm" if out == "kvm" else "tcg"


