"""The Python SDK (sdk/python) against a real VM (issue 16): called by berthd_vm_test.py on its
already-running base-image workspace, so the SDK's calls meet a real guest agent over the
real transport without a boot of its own (a TCG boot costs minutes).

run(url, api_key, workspace, log) raises (Failure, or the SDK's error) on the first check that
fails. It leaves the workspace running, with nothing of its own running in it and its files
under /workspace/sdk-vm-checks removed. It never hibernates or deletes it; its last check
restores a checkpoint, which reboots it, and leaves that checkpoint ("sdk-rollback": berthd
refuses to delete a checkpoint under a running workspace's disks).

Checked: Workspace.connect by name; commands.run (stdout, exit code, CommandExitError on a
non-zero exit, check=False, cwd, env, stdin, an argv list); a background command whose output
arrives while it runs, then kill(); a PTY (input echoed, resize seen by stty, kill); files
(write, read, list, exists, rename, remove, make_dir); a streamed upload and download of
4 MiB compared by SHA-256; a directory as tar both ways; info(); AsyncWorkspace for a few
calls; `with ws.checkpoint()` whose block raises: the VM's disks rolled back (a restart)."""

import asyncio
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "sdk", "python", "src"))
from berthd_harness import Failure, check  # noqa: E402

try:
    from berth import AsyncWorkspace, CommandExitError, Workspace  # noqa: E402
    SDK_IMPORT_ERROR = None
except ImportError as e:  # this python3 lacks httpx (a pyenv shim before /usr/bin on PATH)
    SDK_IMPORT_ERROR = e

ROOT = "/workspace/sdk-vm-checks"
BIG = 4 * 1024 * 1024 + 12345  # bytes: more than one 256 KiB chunk many times over, odd-sized


def _wait_for(cond, seconds, what):
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise Failure(f"{what}: not within {seconds} s")
        time.sleep(0.05)


def _commands(ws, log):
    r = ws.commands.run("echo hello from the guest; echo to-err >&2")
    check(r.exit_code == 0 and r.stdout == "hello from the guest\n" and r.stderr == "to-err\n",
          f"run echo: {r}")
    try:
        ws.commands.run("echo partial; exit 3")
        raise Failure("exit 3 did not raise CommandExitError")
    except CommandExitError as e:
        check(e.exit_code == 3 and e.stdout == "partial\n", f"CommandExitError: {e.exit_code} "
              f"{e.stdout!r}")
    r = ws.commands.run("exit 5", check=False)
    check(r.exit_code == 5, f"check=False: {r}")
    r = ws.commands.run("pwd; echo $SDK_VAR; id -un", cwd="/tmp", env={"SDK_VAR": "v-42"})
    check(r.stdout.split() == ["/tmp", "v-42", "agent"], f"cwd/env: {r.stdout!r}")
    r = ws.commands.run("wc -c; tr a-z A-Z < /dev/null", stdin="four\n")
    check(r.stdout.strip() == "5", f"stdin: {r.stdout!r}")
    r = ws.commands.run(["printf", "%s|", "a b", "$HOME"])
    check(r.stdout == "a b|$HOME|", f"argv list: {r.stdout!r}")
    # A streamed callback sees the lines as they come.
    seen = []
    ws.commands.run("for i in 1 2 3; do echo line$i; done", on_stdout=seen.append)
    check("".join(seen) == "line1\nline2\nline3\n", f"on_stdout: {seen}")
    log("sdk: commands.run (stdout, exit codes, CommandExitError, check=False, cwd, env, stdin, "
        "argv, on_stdout)")


def _background(ws, log):
    h = ws.commands.run("i=0; while true; do i=$((i+1)); echo tick$i; sleep 0.3; done",
                        background=True, tag="sdk-vm-ticks")
    check(h.pid > 0, f"background pid {h.pid}")
    lines, box = [], {}

    def follow():
        try:
            box["result"] = h.wait(on_stdout=lines.append, check=False, request_timeout=120)
        except BaseException as e:  # noqa: BLE001 - reported below
            box["error"] = e

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    # Output arrives while it still runs (live, not at the end).
    _wait_for(lambda: "tick3" in "".join(lines), 60, "a background command's live output")
    check(h.info().running, "the background command stopped by itself")
    check(any(p.tag == "sdk-vm-ticks" for p in ws.commands.list()), "commands.list lacks it")
    check(h.kill(), "kill() found no process")
    t.join(60)
    check(not t.is_alive(), "wait() did not end after kill()")
    check("error" not in box, f"wait() after kill(): {box.get('error')!r}")
    r = box["result"]
    check(r.exit_code != 0, f"a killed command's result: {r}")
    check(not any(p.tag == "sdk-vm-ticks" and p.running for p in ws.commands.list()),
          "the killed command still runs")
    log(f"sdk: background command: {len(''.join(lines).split())} ticks live, killed "
        f"(exit {r.exit_code}, signal {r.signal})")


def _pty(ws, log):
    out = bytearray()
    lock = threading.Lock()

    def on_data(b):
        with lock:
            out.extend(b)

    def text():
        with lock:
            return out.decode("utf-8", "replace")

    term = ws.pty.create(cols=80, rows=24, on_data=on_data, cmd="/bin/bash --norc -i",
                         env={"PS1": "$ "}, tag="sdk-vm-pty")
    try:
        term.send_stdin("echo pty-$((6*7))\n")
        _wait_for(lambda: "pty-42" in text(), 30, "the PTY's echo")
        check("echo pty-$((6*7))" in text(), f"the typed line is not echoed: {text()[-300:]!r}")
        term.send_stdin("stty size\n")
        _wait_for(lambda: "24 80" in text(), 30, "stty size 24 80")
        term.resize(132, 50)
        term.send_stdin("stty size\n")
        _wait_for(lambda: "50 132" in text(), 30, "stty size after resize")
        check(term.running, "the terminal ended early")
    finally:
        killed = term.kill()
    r = term.wait(check=False, request_timeout=60)
    check(killed and r.exit_code != 0, f"PTY kill: {killed}, {r}")
    check(not term.running, "the PTY handle still runs after kill")
    log(f"sdk: pty (echo, resize 80x24 -> 132x50, kill: exit {r.exit_code})")


def _files(ws, log):
    check(ws.files.make_dir(f"{ROOT}/d/e"), "make_dir made nothing")
    check(not ws.files.make_dir(f"{ROOT}/d/e"), "make_dir of an existing dir said True")
    ws.files.write(f"{ROOT}/a.txt", "grüße\n")
    ws.files.write(f"{ROOT}/b.bin", bytes(range(256)))
    check(ws.files.read(f"{ROOT}/a.txt") == "grüße\n", "read a.txt")
    check(ws.files.read(f"{ROOT}/b.bin", format="bytes") == bytes(range(256)), "read b.bin")
    names = sorted((e.name, e.type) for e in ws.files.list(ROOT))
    check(names == [("a.txt", "file"), ("b.bin", "file"), ("d", "dir")], f"list: {names}")
    check(ws.files.exists(f"{ROOT}/a.txt") and not ws.files.exists(f"{ROOT}/nope"), "exists")
    ws.files.rename(f"{ROOT}/a.txt", f"{ROOT}/d/c.txt")
    check(not ws.files.exists(f"{ROOT}/a.txt") and ws.files.read(f"{ROOT}/d/c.txt") == "grüße\n",
          "rename")
    r = ws.commands.run(f"cat {ROOT}/d/c.txt; stat -c %U {ROOT}/d/c.txt")
    check(r.stdout == "grüße\nagent\n", f"the guest's view of the file: {r.stdout!r}")
    ws.files.remove(f"{ROOT}/b.bin")
    check(not ws.files.exists(f"{ROOT}/b.bin"), "remove")
    log("sdk: files (make_dir, write, read, list, exists, rename, remove)")

    # A streamed upload and download, compared by hash on both sides.
    data = os.urandom(BIG)
    digest = hashlib.sha256(data).hexdigest()

    def chunks():
        for i in range(0, len(data), 100_000):
            yield data[i:i + 100_000]

    t0 = time.monotonic()
    ws.files.upload(f"{ROOT}/big.bin", chunks())
    up = time.monotonic() - t0
    r = ws.commands.run(f"sha256sum {ROOT}/big.bin")
    check(r.stdout.split()[0] == digest, f"the guest's hash of the upload: {r.stdout!r}")
    h = hashlib.sha256()
    n = 0
    t0 = time.monotonic()
    for c in ws.files.download(f"{ROOT}/big.bin"):
        h.update(c)
        n += len(c)
    down = time.monotonic() - t0
    check(n == BIG and h.hexdigest() == digest, f"download: {n} bytes, {h.hexdigest()}")
    log(f"sdk: upload {BIG} bytes in {up:.1f} s, download in {down:.1f} s, SHA-256 equal")

    # A directory as tar, both ways.
    local = tempfile.mkdtemp(prefix="sdk-vm-")
    try:
        src = os.path.join(local, "src")
        os.makedirs(os.path.join(src, "sub"))
        with open(os.path.join(src, "one.txt"), "w") as f:
            f.write("one\n")
        with open(os.path.join(src, "sub", "two.bin"), "wb") as f:
            f.write(b"\x00\x01two" * 1000)
        os.symlink("one.txt", os.path.join(src, "link"))
        t = ws.files.upload_dir(src, f"{ROOT}/tree")
        check(t.entries >= 4, f"upload_dir: {t}")
        r = ws.commands.run(f"cd {ROOT}/tree && cat one.txt && wc -c < sub/two.bin && "
                            "readlink link")
        check(r.stdout == "one\n5000\none.txt\n", f"the uploaded tree: {r.stdout!r}")
        ws.commands.run(f"echo made-in-guest > {ROOT}/tree/sub/three.txt")
        dst = os.path.join(local, "dst")
        t = ws.files.download_dir(f"{ROOT}/tree", dst)
        check(t.entries >= 5, f"download_dir: {t}")
        check(open(os.path.join(dst, "sub", "three.txt")).read() == "made-in-guest\n"
              and open(os.path.join(dst, "sub", "two.bin"), "rb").read() == b"\x00\x01two" * 1000
              and os.readlink(os.path.join(dst, "link")) == "one.txt",
              f"the downloaded tree: {sorted(os.listdir(dst))}")
    finally:
        shutil.rmtree(local, ignore_errors=True)
    log("sdk: upload_dir / download_dir (tar both ways, a symlink kept)")


async def _async(url, api_key, name):
    async with await AsyncWorkspace.connect(name, url=url, api_key=api_key) as aws:
        r = await aws.commands.run("echo async-$((1+1))")
        check(r.stdout == "async-2\n", f"async run: {r}")
        await aws.files.write(f"{ROOT}/async.txt", "from asyncio")
        check(await aws.files.read(f"{ROOT}/async.txt") == "from asyncio", "async read")
        info = await aws.info()
        check(info.state == "running" and info.name == name, f"async info: {info}")


class _BlockFailed(Exception):
    """What the checkpoint block raises: nothing else does, so catching it proves it was the
    block's own exception that came out of ws.checkpoint()."""


def _checkpoint_rollback(ws, log):
    """`with ws.checkpoint()` on the running VM: a checkpoint of the running workspace (the
    agent syncs first), a change inside the block, the block raises. The SDK restores the
    checkpoint (berthd stops the VM, puts its disks back, boots it) and waits until it runs
    again, then re-raises the block's exception: the change is gone, the boot is a new one,
    and the failed state is the undo checkpoint (deleted here; "sdk-rollback" stays, under
    the running disks)."""
    path = "/workspace/sdk-cp.txt"
    ws.files.write(path, "before")
    boot = ws.commands.run("cat /proc/sys/kernel/random/boot_id").stdout.strip()
    # A TCG boot takes 30-60 s, and the stop before it up to berthd's shutdown grace.
    scope = ws.checkpoint(name="sdk-rollback", request_timeout=900)
    t0 = time.monotonic()
    t1 = t0
    try:
        with scope as cp:
            taken = time.monotonic() - t0
            check(cp.name == "sdk-rollback" and cp.kind == "manual" and cp.taken_while == "running",
                  f"the checkpoint: {cp}")
            ws.files.write(path, "during")
            check(ws.files.read(path) == "during", f"{path} in the block")
            t1 = time.monotonic()
            raise _BlockFailed("the block fails on purpose")
        raise Failure("the block ended without its exception")
    except _BlockFailed:
        pass
    rolled = time.monotonic() - t1
    check(scope.rollback_error is None, f"the rollback failed: {scope.rollback_error!r}")
    restored = scope.restored
    check(restored is not None and restored.workspace.state == "running"
          and restored.undo is not None and restored.undo.kind == "before_restore",
          f"the rollback's restore: {restored}")
    check(ws.info().state == "running", "not running after the rollback")
    got = ws.files.read(path)
    check(got == "before", f"{path} after the rollback: {got!r}, not 'before'")
    boot2 = ws.commands.run("cat /proc/sys/kernel/random/boot_id").stdout.strip()
    check(boot2 and boot2 != boot, f"the rollback did not restart the VM (boot_id {boot2})")
    ws.checkpoints.delete(restored.undo.id)
    ws.files.remove(path)
    log(f"sdk: with ws.checkpoint(): checkpoint of the running VM in {taken:.2f} s; the block "
        f"raised; rollback (stop, restore, boot, wait for running) in {rolled:.1f} s; {path} "
        "reads 'before' again, new boot")


def _run_elsewhere(url, api_key, workspace, log):
    """This interpreter cannot import the SDK (no httpx): the checks in the system's python3,
    which has the SDK's dependencies (scripts/setup installs them), its log lines passed on."""
    python = "/usr/bin/python3"
    if os.path.realpath(python) == os.path.realpath(sys.executable) or not os.access(python, os.X_OK):
        raise Failure(f"the Python SDK cannot be imported: {SDK_IMPORT_ERROR}")
    log(f"sdk: {sys.executable} lacks the SDK's dependencies ({SDK_IMPORT_ERROR}); "
        f"running the checks in {python}")
    proc = subprocess.Popen([python, os.path.abspath(__file__), url, workspace],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    proc.stdin.write(api_key + "\n")  # not on the command line
    proc.stdin.close()
    tail = []
    for line in proc.stdout:
        line = line.rstrip("\n")
        tail = (tail + [line])[-40:]
        log(f"  {line}")
    if proc.wait() != 0:
        raise Failure(f"the SDK checks in {python} failed (exit {proc.returncode}): "
                      + " | ".join(tail[-5:]))


def run(url, api_key, workspace, log):
    if SDK_IMPORT_ERROR is not None:
        _run_elsewhere(url, api_key, workspace, log)
        return
    t0 = time.monotonic()
    with Workspace.connect(workspace, url=url, api_key=api_key) as ws:
        info = ws.info()
        check(info.state == "running" and workspace in (info.name, info.id),
              f"info(): {info}")
        before = {p.pid for p in ws.commands.list() if p.running}
        try:
            _commands(ws, log)
            _background(ws, log)
            _pty(ws, log)
            _files(ws, log)
            asyncio.run(_async(url, api_key, info.name))
            log("sdk: AsyncWorkspace (connect, run, write, read, info)")
            _checkpoint_rollback(ws, log)  # last: it reboots the VM
        finally:
            try:
                ws.files.remove(ROOT)
            except Exception as e:  # noqa: BLE001 - a failure above is the one to report
                log(f"sdk: removing {ROOT}: {e}")
        left = [p for p in ws.commands.list() if p.running and p.pid not in before]
        check(not left, f"processes left running: {left}")
        check(not ws.files.exists(ROOT), f"{ROOT} is still there")
        check(ws.info().state == "running", "the workspace is not running after the checks")
    log(f"sdk: all checks against {info.name} passed in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    # As _run_elsewhere runs it: url and workspace as arguments, the key on stdin.
    def _log(msg):
        print(msg, flush=True)  # the parent's log adds the time

    try:
        run(sys.argv[1], sys.stdin.readline().strip(), sys.argv[2], _log)
    except Exception as e:  # noqa: BLE001 - the traceback, then one line, to the parent
        traceback.print_exc(file=sys.stdout)
        _log(f"FAIL {type(e).__name__}: {e}")
        sys.exit(1)
