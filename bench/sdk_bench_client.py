"""The Python side of bench/run-sdk-bench, run as a child process of it (so that its memory is
its own): one subcommand a measurement, one JSON line on stdout.

  exec WS N         N round trips of `true` each way, in blocks that take turns: the SDK
                    (ws.commands.run, which reads the NDJSON stream), a bare http.client request
                    on one keep-alive connection with the SDK's body and Accept header, the
                    same bare request answered as plain JSON (what a user writing it by hand
                    sends), and the SDK's request through bare httpx (its transport; with
                    TCP_NODELAY, as the SDK sets it). Times in ms.
  upload WS SRC DST ws.files.upload(DST, open(SRC, "rb")): seconds and CPU seconds of the
                    call, and VmHWM (the process's peak RSS) after imports and a first call,
                    and after the upload.

Configured by BERTH_URL and BERTH_API_KEY; the SDK from sdk/python/src of this checkout."""

import http.client
import json
import os
import sys
import time
from urllib.parse import urlsplit

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python", "src"))
import httpx  # noqa: E402
from berth import Workspace  # noqa: E402
from berth._driver import set_nodelay  # noqa: E402

# Each way runs this many round trips before the next way takes its turn: short, so that
# bursts of load on a shared machine hit all of them alike.
BLOCK = 5
WARM_UP = 20


def hwm() -> int:
    """The process's peak RSS so far, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def bare_exec(conn: http.client.HTTPConnection, path: str, key: str, ndjson: bool) -> None:
    headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    if ndjson:
        headers["Accept"] = "application/x-ndjson"
    conn.request("POST", path, json.dumps({"cmd": "true"}), headers)
    res = conn.getresponse()
    body = res.read()
    if res.status != 200:
        raise RuntimeError(f"exec: {res.status} {body[:200]!r}")
    last = json.loads(body.splitlines()[-1]) if ndjson else json.loads(body)
    if last.get("exit_code") != 0:
        raise RuntimeError(f"exec: {body[:200]!r}")


def measure_exec(name: str, n: int) -> dict:
    ws = Workspace.connect(name)
    url = urlsplit(os.environ["BERTH_URL"])
    key = os.environ["BERTH_API_KEY"]
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    path = f"/v1/workspaces/{ws.id}/exec"

    def sdk() -> None:
        if ws.commands.run("true").exit_code != 0:
            raise RuntimeError("sdk exec failed")

    client = httpx.Client(base_url=os.environ["BERTH_URL"], trust_env=False)
    body = json.dumps({"cmd": "true", "timeout_ms": 60000})  # the SDK's body
    headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json",
               "Accept": "application/x-ndjson"}

    def bare_httpx() -> None:
        with client.stream("POST", path, content=body, headers=headers) as res:
            data = b"".join(res.iter_raw())
            set_nodelay(res)
        if res.status_code != 200 or json.loads(data.splitlines()[-1]).get("exit_code") != 0:
            raise RuntimeError(f"exec: {res.status_code} {data[:200]!r}")

    ways = {"sdk": sdk,
            "bare_ndjson": lambda: bare_exec(conn, path, key, True),
            "bare_json": lambda: bare_exec(conn, path, key, False),
            "bare_httpx": bare_httpx}
    times = {k: [] for k in ways}
    for fn in ways.values():  # warm-up: connections open, code paths taken
        for _ in range(WARM_UP):
            fn()
    while len(times["sdk"]) < n:
        for k, fn in ways.items():
            for _ in range(min(BLOCK, n - len(times[k]))):
                t0 = time.perf_counter()
                fn()
                times[k].append((time.perf_counter() - t0) * 1000)
    conn.close()
    client.close()
    ws.close()
    return times


def measure_upload(name: str, src: str, dst: str) -> dict:
    ws = Workspace.connect(name)
    ws.files.write(dst + ".warm", b"warm")  # imports done, a connection open: the baseline
    ws.files.remove(dst + ".warm")
    base = hwm()
    t0, c0 = time.perf_counter(), time.process_time()
    with open(src, "rb") as f:
        info = ws.files.upload(dst, f)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    ws.close()
    return {"seconds": seconds, "cpu": cpu, "size": info.size, "base_rss": base,
            "peak_rss": hwm()}


def main() -> int:
    what = sys.argv[1]
    if what == "exec":
        out = measure_exec(sys.argv[2], int(sys.argv[3]))
    elif what == "upload":
        out = measure_upload(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(f"unknown measurement {what}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
