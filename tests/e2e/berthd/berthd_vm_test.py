#!/usr/bin/env python3
"""End to end: the real berthd binary drives real VMs (KVM when it works, TCG otherwise)
booted from the base image, through its HTTP API.

One run, sharing VMs between checks where that is honest (a TCG boot costs a minute):
  - two workspaces are created at once and berthd is SIGKILLed during the creates (checked to
    be creating or starting then); a new berthd on the same port (the VMs' passt still run:
    none holds berthd's socket) reconciles both to running, with no orphan VM or disk
  - exec; a file written in /workspace; a package installed with sudo apt-get from the Debian
    mirror with no `apt-get update` first (the image ships its package lists); the diff of a
    checkpoint taken before both and now lists both
  - the Python SDK's calls against the running VM (sdk_vm_checks.py)
  - from inside the guest berthd's port does not answer (the guest cannot reach the host's
    loopback) while the public mirror does
  - hibernate with a background process running; start resumes the same process
  - stop, SIGKILL of berthd during the stop (checked to be stopping then), a new berthd on the
    same port finishes it; a disk checkpoint of the stopped workspace; start (on the
    checkpoint's new layers, the frozen ones its QEMU's to read only): the file and the package
    are still there; the guest changes a file, writes others, one not synced; a checkpoint of
    the running workspace moves its disks in the same boot, and it writes one more; the diff of
    the two checkpoints lists the changed file and the two new ones
  - an idle workspace stops itself; restoring the running checkpoint brings back what was
    there then (the unsynced file too) without what came after; an exec wakes it
  - a checkpoint with memory of a counting process and a file; both changed; the restore
    resumes the same process (same boot) at the checkpoint's count with the file as it was;
    restoring the restore's undo brings the changed count and file back
  - two forks of a memory checkpoint, each a machine of its own; a template with a server
    started, and a workspace from it answering on it at once
  - a template built from a script (a package installed, a server started with `start`, `ready`
    waited for): a workspace from it has both; deleting the template deletes its workspace
  - another tenant sees none of it
  - a second berthd that would run VMs on this host refuses to start, naming the first
  - the console log is virtlogd's (bounded), the agent token on no command line
  - each workspace's QEMU and passt run as its own uid; its disks, token and run/ are that uid's
    alone (0600 / 0700), the database 0600, the shared backing image still root's; neither
    nobody nor the other workspace's uid can open them
  - delete removes the domains and the disks

Needs root, libvirt and the base image (images/build base). Exit 0 PASS, 1 FAIL, 77 SKIP.
BERTH_E2E_ISOLATION=off runs it with "network": {"isolation": false} (the uid checks hold
either way).
"""

import grp
import json
import re
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from berthd_harness import (AGENT, BERTHD, IMAGES_DATA, REPO, TEST_DISK_FLOOR, Api, Berthd, Failure,  # noqa: E402
                            accel, check, log, our_domains, virsh)
import sdk_vm_checks  # noqa: E402

T = "e2e_berthd_vms"
ISOLATION = os.environ.get("BERTH_E2E_ISOLATION", "on") != "off"


def run_as(uid, *cmd):
    """cmd as uid (gid the same, no supplementary groups): the CompletedProcess."""
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd],
                          capture_output=True, text=True)


def process_uids(needle):
    """The real uids of the processes whose command line contains needle."""
    out = subprocess.run(["ps", "-eo", "ruid=,rgid=,args="], capture_output=True, text=True).stdout
    return [tuple(int(x) for x in line.split(None, 2)[:2]) for line in out.splitlines()
            if needle in line and "ps -eo" not in line]


def check_private_files(data, ids):
    """Each running workspace's QEMU and passt run as a uid of its own, which alone opens its
    files; berthd's own files are its own (issue 12)."""
    uids = {}
    for ws in ids:
        d = os.path.join(data, "workspaces", ws)
        qemu = process_uids(f"guest=berth-{ws},")
        passt = process_uids(os.path.join(d, "run", "passt.sock"))
        check(len(qemu) == 1, f"QEMU of {ws}: {qemu}")
        check(passt and all(u == passt[0][0] for u, _ in passt), f"passt of {ws}: {passt}")
        uid, gid = qemu[0]
        check(uid >= 2000000 and passt[0][0] == uid,
              f"{ws}: QEMU runs as {uid}, passt as {passt[0][0]}: not one workspace uid")
        # QEMU's group is kvm (to open /dev/kvm); passt's the uid's own.
        check(gid == grp.getgrnam("kvm").gr_gid and passt[0][1] == uid,
              f"{ws}: QEMU's gid {gid}, passt's {passt[0][1]}")
        for name, mode in (("root.qcow2", 0o600), ("data.qcow2", 0o600), ("token", 0o600),
                           ("run", 0o700)):
            st = os.lstat(os.path.join(d, name))
            check(st.st_uid == uid and (st.st_mode & 0o7777) == mode,
                  f"{ws}/{name}: owner {st.st_uid} mode {oct(st.st_mode & 0o7777)}, "
                  f"not {uid} {oct(mode)}")
        st = os.stat(d)
        check(st.st_uid == 0 and (st.st_mode & 0o7777) == 0o711, f"{d}: {oct(st.st_mode)}")
        # The image's backing disk is shared by every workspace: libvirt must not have given it to
        # this one (relabel='no'), and no workspace uid may write it.
        info = json.loads(subprocess.run(["qemu-img", "info", "-U", "--output=json",
                                          os.path.join(d, "root.qcow2")],
                                         capture_output=True, text=True, check=True).stdout)
        backing = info.get("full-backing-filename") or info.get("backing-filename")
        check(backing, f"{ws}: root.qcow2 has no backing file: {info}")
        st = os.stat(backing)
        check(st.st_uid == 0 and (st.st_mode & 0o022) == 0 and (st.st_mode & 0o004),
              f"backing {backing}: owner {st.st_uid} mode {oct(st.st_mode & 0o7777)}")
        uids[ws] = uid
    check(len(set(uids.values())) == len(uids), f"workspaces share a uid: {uids}")
    for name in ("berth.db", "berth.db-wal", "berth.db-shm", "admin.key"):
        path = os.path.join(data, name)
        mode = os.lstat(path).st_mode & 0o7777
        check(mode == 0o600, f"{name} is {oct(mode)}")
    # Another local user, and the other workspace's QEMU uid, open nothing of a workspace's.
    for ws in ids:
        d = os.path.join(data, "workspaces", ws)
        others = [65534] + [u for w, u in uids.items() if w != ws]
        for other in others:
            for name in ("root.qcow2", "data.qcow2", "token", "run/passt.sock", "../../berth.db"):
                r = run_as(other, "head", "-c", "1", os.path.join(d, name))
                check(r.returncode != 0 and "Permission denied" in r.stderr,
                      f"uid {other} read {ws}/{name}: rc {r.returncode} {r.stderr.strip()}")
    log(f"workspace uids {sorted(uids.values())}: files private to each, backing image root's")
    return uids


def check_unplugged(data, ws):
    """After a diff: the running domain has its own two disks only, and no scratch overlay is
    left in the workspace's directory."""
    disks = [line.split()[0] for line in virsh("domblklist", f"berth-{ws}").stdout.splitlines()[2:] if line.strip()]
    check(disks == ["vda", "vdb"], f"disks still plugged in after a diff: {disks}")
    left = [n for n in os.listdir(os.path.join(data, "workspaces", ws)) if n.startswith("diff.")]
    check(not left, f"a diff's overlays are left: {left}")


def top_layers(d, ws):
    """The files the domain's disks are on (vda, vdb), by libvirt: the live ones while it
    runs, else its definition's."""
    out = virsh("domblklist", f"berth-{ws}").stdout
    files = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("vda", "vdb"):
            files[parts[0]] = parts[1]
    check(set(files) == {"vda", "vdb"} and all(os.path.dirname(f) == d for f in files.values()),
          f"the disks of berth-{ws}: {out}")
    return os.path.basename(files["vda"]), os.path.basename(files["vdb"])


def check_layers(d, frozen, tops, uid):
    """Frozen layers root's (0440 with the uid's ACL entry), the tops the uid's alone."""
    for names, owner, mode in ((frozen, 0, 0o440), (tops, uid, 0o600)):
        for name in names:
            st = os.lstat(os.path.join(d, name))
            check((st.st_uid, st.st_mode & 0o7777) == (owner, mode),
                  f"{name}: owner {st.st_uid} mode {oct(st.st_mode & 0o7777)}, not {owner} {oct(mode)}")


def main():
    if os.geteuid() != 0:
        print(f"SKIP {T}: needs root")
        return 77
    for binary in (BERTHD, AGENT):
        if not os.access(binary, os.X_OK):
            print(f"FAIL {T}: {binary} is missing (build first)")
            return 1
    t_start = time.monotonic()
    log("libvirt and the base image (a no-op when up to date)")
    subprocess.run([f"{REPO}/images/lib/ensure-libvirt"], check=True)
    subprocess.run([f"{REPO}/images/build", "base", "--data", IMAGES_DATA, "--agent", AGENT], check=True)

    data = tempfile.mkdtemp(prefix="berthd-e2e-", dir="/var/lib")
    os.chmod(data, 0o711)
    config = os.path.join(data, "config.json")
    network = {} if ISOLATION else {"network": {"isolation": False}}
    with open(config, "w") as f:
        json.dump({"listen": "127.0.0.1:0", "data_dir": data,
                   "images_dir": os.path.join(IMAGES_DATA, "images"), "accel": accel(),
                   "idle_poll_ms": 1000, "stop_grace_s": 30, "min_free_disk": TEST_DISK_FLOOR, **network}, f)
    berthd = Berthd(data, config)
    ids = []
    api = None
    figures = {}
    try:
        url = berthd.start()
        key = open(os.path.join(data, "admin.key")).read().strip()
        # One berthd that runs VMs per host (they would share workspace uids and the nftables
        # table): a second one refuses to start, naming the first.
        with tempfile.TemporaryDirectory(prefix="berth-second-") as other:
            second = subprocess.run([BERTHD, "--data", other, "--listen", "127.0.0.1:0"],
                                    capture_output=True, text=True, timeout=120)
            said = second.stdout + second.stderr
            check(second.returncode != 0 and "another berthd runs VMs on this host" in said
                  and f"pid {berthd.proc.pid}," in said, f"a second berthd on this host: rc {second.returncode}: {said[-600:]}")
        log("a second berthd on this host refused to start")
        api = Api(url, key)
        log(f"berthd at {url}: {berthd.ran()} (asked for accel {accel()}), "
            f"network isolation {'on' if ISOLATION else 'off'}")
        # Every restart below is on this same port, while VMs (and their passt) run: a child that
        # inherited berthd's listening socket would make the bind fail.
        first_url = url
        with open(config, "w") as f:
            json.dump({"listen": url.split("//", 1)[1], "data_dir": data,
                       "images_dir": os.path.join(IMAGES_DATA, "images"), "accel": accel(),
                       "idle_poll_ms": 1000, "stop_grace_s": 30, **network}, f)

        # --- two creates at once; berthd killed in the middle -------------------------------
        a = api.ok("POST", "/v1/workspaces", {"name": "e2e-a", "size": "small", "disk_gib": 4},
                   )["id"]
        b = api.ok("POST", "/v1/workspaces", {"name": "e2e-b", "size": "small", "disk_gib": 2},
                   )["id"]
        ids += [a, b]
        time.sleep(3)  # into disk creation and the first boot
        states = [api.ok("GET", f"/v1/workspaces/{ws}")["state"] for ws in (a, b)]
        check(all(st in ("creating", "starting") for st in states),
              f"not mid-create at the kill: {states}")
        log(f"SIGKILL berthd during the creates ({', '.join(states)})")
        berthd.kill9()
        url = berthd.start()
        check(url == first_url, f"the restarted berthd is at {url}, not {first_url}")
        api = Api(url, key)
        for ws in (a, b):
            answer, secs = api.wait(ws, "running")
            log(f"{answer['name']} running {secs:.0f} s after the restart")
        figures["create_to_ready_after_kill_s"] = round(time.monotonic() - t_start, 1)
        check(our_domains(ids) == sorted(f"berth-{i}" for i in ids),
              f"domains after reconcile: {our_domains(ids)}")
        check(sorted(os.listdir(os.path.join(data, "workspaces"))) == sorted(ids),
              f"workspace dirs: {os.listdir(os.path.join(data, 'workspaces'))}")
        host = api.exec(b, "hostname")
        check(host["stdout"].strip() == "e2e-b", f"hostname of b: {host}")
        check_private_files(data, [a, b])
        api.ok("DELETE", f"/v1/workspaces/{b}")

        # --- exec, a file, a package, the network -----------------------------------------
        # A checkpoint first, which the diff below compares with (a running one: its ext4
        # journal is replayed into the diff's scratch overlay, never into the checkpoint).
        fresh = api.ok("POST", f"/v1/workspaces/{a}/checkpoints", {"name": "fresh"})
        nonce = secrets.token_hex(8)
        r = api.exec(a, f"echo {nonce} > /workspace/note && sync && id -un")
        check(r["exit_code"] == 0 and r["stdout"].strip() == "agent", f"write note: {r}")
        # With no `apt-get update` first: the image ships its package lists (issue 17).
        log("sudo apt-get install tree (from the Debian mirror, through passt)")
        r = api.exec(a, "sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q tree >/dev/null "
                        "&& tree --version && sync", timeout_s=900)
        check(r["exit_code"] == 0 and r["stdout"].startswith("tree v"), f"sudo apt-get install tree: {r}")
        # What changed since: the guest compares the checkpoint's disks, plugged into it
        # read-only, with itself now: the note written and the package installed.
        t0 = time.monotonic()
        diff = api.ok("GET", f"/v1/workspaces/{a}/checkpoints/fresh/diff")
        figures["diff_current_s"] = round(time.monotonic() - t0, 1)
        added = {f["path"]: f for f in diff["files"]["added"]}
        installed = {p["name"]: p["version"] for p in diff["packages"]["installed"]}
        check(diff["from"] == fresh["id"] and diff["to"] == "current", f"diff ends: {diff['from']} {diff['to']}")
        check("/workspace/note" in added and added["/workspace/note"]["size"] == len(nonce) + 1,
              f"the note is not added in the diff: {diff['files']}")
        check("tree" in installed and not diff["packages"]["removed"], f"the diff's packages: {diff['packages']}")
        check(diff["paths"] == ["/workspace", "/home/agent"] and not diff["files"]["truncated"], f"diff: {diff}")
        check_unplugged(data, a)
        log(f"diff of checkpoint fresh and now in {figures['diff_current_s']} s (the guest's walk "
            f"{diff['took_ms']} ms): {diff['files']['counts']}, installed {sorted(installed)}")
        # The timeline has each exec through the API with its command, the guest's exit code,
        # berthd's measure of its duration, and the key that ran it (issue 15).
        r = api.exec(a, "exit 7")
        check(r["exit_code"] == 7, f"exit 7: {r}")
        # (The exec's event is written as its stream ends, which may be just after the answer.)
        deadline = time.monotonic() + 10
        while True:
            execs = api.ok("GET", f"/v1/workspaces/{a}/events?type=exec&limit=1000")["events"]
            if execs and execs[-1]["data"].get("cmd") == "exit 7" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        apt = [e for e in execs if e["data"].get("cmd", "").startswith("sudo DEBIAN_FRONTEND")]
        check(len(apt) == 1 and apt[0]["data"].get("exit_code") == 0 and "sudo apt-get" not in apt[0]["data"]["cmd"]
              and apt[0]["data"].get("duration_ms", 0) > 1000 and apt[0]["actor"].startswith("key_"),
              f"the timeline's apt-get exec: {apt}")
        check(execs[-1]["data"].get("cmd") == "exit 7" and execs[-1]["data"].get("exit_code") == 7,
              f"the timeline's last exec: {execs[-1:]}")
        log(f"timeline: {len(execs)} execs, apt-get's {apt[0]['data']['duration_ms']} ms by {apt[0]['actor']}")
        port = url.rsplit(":", 1)[1]
        probe = ("gw=$(ip route | awk '/^default/ {print $3; exit}'); "
                 f"for h in $gw 10.0.2.2 127.0.0.1; do "
                 f"  if curl -s -m 5 -o /dev/null http://$h:{port}/v1/health; then echo reached $h; fi; "
                 "done; "
                 "curl -s -m 30 -o /dev/null -w 'mirror %{http_code}\\n' http://deb.debian.org/debian/dists/bookworm/Release")
        r = api.exec(a, probe, timeout_s=120)
        check("reached" not in r["stdout"], f"the guest reached berthd's port: {r['stdout']}")
        check("mirror 200" in r["stdout"], f"the guest could not reach the mirror: {r}")
        log("guest: berthd's port unreachable, mirror reachable")
        # The Python SDK against this real VM (issue 16): it leaves the workspace as it found it.
        sdk_vm_checks.run(url, key, a, log)

        # --- hibernate with a background process ------------------------------------------
        bg = api.ok("POST", f"/v1/workspaces/{a}/exec",
                    {"cmd": "i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; sleep 1; done",
                     "background": True, "tag": "counter"})
        time.sleep(3)
        hib_boot = api.exec(a, "cat /proc/sys/kernel/random/boot_id")["stdout"].strip()
        d = os.path.join(data, "workspaces", a)
        hib_tops = top_layers(d, a)
        t0 = time.monotonic()
        api.ok("POST", f"/v1/workspaces/{a}/hibernate")
        api.wait(a, "hibernated", 600)
        figures["hibernate_s"] = round(time.monotonic() - t0, 1)
        # A checkpoint with memory of the hibernated workspace: its save, copied; the save then
        # resumes onto new tops (below: the same process goes on).
        t0 = time.monotonic()
        asleep = api.ok("POST", f"/v1/workspaces/{a}/checkpoints", {"name": "asleep", "memory": True})
        figures["memory_checkpoint_hibernated_s"] = round(time.monotonic() - t0, 2)
        check(asleep["memory"] is True and asleep["taken_while"] == "hibernated" and asleep["pause_ms"] == 0,
              f"checkpoint of the hibernated workspace: {asleep}")
        check(api.ok("GET", f"/v1/workspaces/{a}")["state"] == "hibernated", "woken by its checkpoint")
        # The memory image holds whatever the guest held: libvirt's, and nobody else's.
        save = f"/var/lib/libvirt/qemu/save/berth-{a}.save"
        st = os.stat(save)
        check((st.st_mode & 0o077) == 0, f"{save}: owner {st.st_uid} mode {oct(st.st_mode & 0o7777)}")
        t0 = time.monotonic()
        api.ok("POST", f"/v1/workspaces/{a}/start")
        api.wait(a, "running", 600)
        figures["resume_s"] = round(time.monotonic() - t0, 1)
        proc = api.ok("GET", f"/v1/workspaces/{a}/processes/counter")
        check(proc["pid"] == bg["pid"] and proc["status"] == "running", f"after resume: {proc}")
        c1 = int(api.exec(a, "cat /tmp/counter")["stdout"])
        time.sleep(2.5)
        c2 = int(api.exec(a, "cat /tmp/counter")["stdout"])
        check(c2 > c1, f"the background process does not count on: {c1} then {c2}")
        resumed_tops = top_layers(d, a)
        check(resumed_tops != hib_tops, f"resumed on its old tops {hib_tops}")
        log(f"hibernate {figures['hibernate_s']} s, checkpoint while hibernated "
            f"{figures['memory_checkpoint_hibernated_s']} s, resume {figures['resume_s']} s onto its new tops; "
            f"process {bg['pid']} went on")

        # --- stop; berthd killed during it; start: file and package still there -----------
        api.ok("POST", f"/v1/workspaces/{a}/stop")
        time.sleep(1)
        state = api.ok("GET", f"/v1/workspaces/{a}")["state"]
        check(state == "stopping", f"not stopping at the kill: {state}")
        log("SIGKILL berthd during the stop (stopping), the VM and its passt running")
        berthd.kill9()
        url = berthd.start()
        check(url == first_url, f"the restarted berthd is at {url}, not {first_url}")
        api = Api(url, key)
        api.wait(a, "stopped", 300)
        check(virsh("domstate", f"berth-{a}").stdout.strip() == "shut off", "the VM still runs")
        # A checkpoint of the stopped workspace: its disks become frozen layers, and it boots on
        # new tops over them. (The SDK's checks above left a checkpoint of their own under them.)
        d = os.path.join(data, "workspaces", a)
        before = top_layers(d, a)
        t0 = time.monotonic()
        cp = api.ok("POST", f"/v1/workspaces/{a}/checkpoints", {"name": "with-note"})
        figures["disk_checkpoint_stopped_s"] = round(time.monotonic() - t0, 2)
        check(cp["kind"] == "manual" and cp["taken_while"] == "stopped", f"checkpoint: {cp}")
        t0 = time.monotonic()
        api.ok("POST", f"/v1/workspaces/{a}/start")
        api.wait(a, "running")
        figures["cold_start_s"] = round(time.monotonic() - t0, 1)
        r = api.exec(a, "cat /workspace/note; tree --version")
        check(r["stdout"].split()[0] == nonce and "tree v" in r["stdout"], f"after stop/start: {r}")
        log(f"cold start {figures['cold_start_s']} s on the checkpoint's new layers; note and tree survived")
        # Its QEMU reads the frozen layers (root's, through an ACL entry for its uid alone) and
        # writes only the new tops.
        uid = process_uids(f"guest=berth-{a},")[0][0]
        tops = top_layers(d, a)
        check(tops != before, f"the checkpoint left the disks on {tops}")
        check_layers(d, ("root.qcow2", "data.qcow2") + before, tops, uid)
        frozen = os.path.join(d, before[0])
        r = run_as(uid, "sh", "-c", f"head -c 4 {frozen} > /dev/null")
        check(r.returncode == 0, f"the workspace uid cannot read its frozen layer: {r.stderr}")
        r = run_as(uid, "sh", "-c", f"printf x >> {frozen}")
        check(r.returncode != 0, "the workspace uid wrote its frozen layer")
        r = run_as(uid, "chmod", "0600", frozen)
        check(r.returncode != 0, "the workspace uid changed its frozen layer's mode")
        r = run_as(65534, "head", "-c", "1", frozen)
        check(r.returncode != 0 and "Permission denied" in r.stderr, "another uid read a frozen layer")
        # The guest changes its files after the checkpoint, and writes one it does not sync.
        r = api.exec(a, "echo changed > /workspace/note && echo new > /workspace/extra && sync && "
                        "echo unsynced > /workspace/unsynced")
        check(r["exit_code"] == 0, f"changing the files: {r}")
        # A checkpoint of the running workspace: the guest syncs, its disks move onto new layers
        # while it runs (same boot), and what it writes after lands above the checkpoint.
        boot_id = api.exec(a, "cat /proc/sys/kernel/random/boot_id")["stdout"]
        t0 = time.monotonic()
        live = api.ok("POST", f"/v1/workspaces/{a}/checkpoints", {"name": "live"})
        figures["disk_checkpoint_running_s"] = round(time.monotonic() - t0, 2)
        check(live["taken_while"] == "running" and live["parent"] == cp["id"], f"running checkpoint: {live}")
        check(api.ok("GET", f"/v1/workspaces/{a}")["state"] == "running", "not running after its checkpoint")
        r = api.exec(a, "cat /proc/sys/kernel/random/boot_id; echo after > /workspace/after && sync")
        check(r["exit_code"] == 0 and r["stdout"].startswith(boot_id), f"after the running checkpoint: {r}")
        moved = top_layers(d, a)
        check(moved != tops and all(n.endswith(".qcow2") for n in moved), f"the VM's disks did not move: {moved}")
        check_layers(d, tops, moved, uid)
        log(f"checkpointed the running workspace in {figures['disk_checkpoint_running_s']} s, same boot; "
            "its QEMU writes the new layers")
        # Between two checkpoints (four disks plugged in): the note changed, two files added;
        # what came after the second is not in it.
        diff = api.ok("GET", f"/v1/workspaces/{a}/checkpoints/with-note/diff?to=live")
        # (Under /workspace: the guest's own housekeeping may touch its home.)
        paths = {k: sorted(f["path"] for f in diff["files"][k] if f["path"].startswith("/workspace/"))
                 for k in ("added", "changed", "removed")}
        check(diff["to"] == live["id"] and paths["changed"] == ["/workspace/note"]
              and paths["added"] == ["/workspace/extra", "/workspace/unsynced"] and not paths["removed"],
              f"diff of two checkpoints: {paths}")
        check(not any(diff["packages"][k] for k in ("installed", "changed", "removed")), f"packages: {diff['packages']}")
        check_unplugged(data, a)
        log(f"diff of checkpoints with-note and live: {paths}")

        # --- idle stop, wake on exec --------------------------------------------------------
        api.ok("PATCH", f"/v1/workspaces/{a}", {"idle_timeout": 15})
        deadline = time.monotonic() + 240
        while api.ok("GET", f"/v1/workspaces/{a}")["state"] != "stopped":
            check(time.monotonic() < deadline, "the idle workspace did not stop")
            time.sleep(2)
        check("stopped_by_idle" in api.events(a), f"events: {api.events(a)}")
        # Stopped: back to the running checkpoint (two frozen layers under the new top), the
        # state left kept as the undo checkpoint. The file the guest never synced is there: the
        # checkpoint asked the guest to sync first.
        t0 = time.monotonic()
        restored = api.ok("POST", f"/v1/workspaces/{a}/checkpoints/live/restore")
        figures["disk_restore_stopped_s"] = round(time.monotonic() - t0, 2)
        check(restored["undo"] and restored["undo"]["kind"] == "before_restore", f"restore: {restored}")
        r = api.exec(a, "cat /workspace/note /workspace/unsynced; ls /workspace")
        check(r["stdout"].split()[:2] == ["changed", "unsynced"] and "extra" in r["stdout"]
              and "after" not in r["stdout"].split(), f"after the restore and wake: {r}")
        check("woken" in api.events(a) and "restored" in api.events(a), f"events: {api.events(a)}")
        names = [c["name"] for c in api.ok("GET", f"/v1/workspaces/{a}/checkpoints")["checkpoints"]]
        check(names == [restored["undo"]["id"], "live", "with-note", "asleep", "sdk-rollback", "fresh"],
              f"checkpoints: {names}")
        log(f"idle stop; restored the running checkpoint in {figures['disk_restore_stopped_s']} s (the "
            "unsynced file there, the later one gone); an exec woke it")
        api.ok("PATCH", f"/v1/workspaces/{a}", {"idle_timeout": 3600})

        # --- a checkpoint with memory: a counting process and a file, both changed, restored ---
        # The counter lives in the process (a signal adds 100000 to it); /dev/shm shows it.
        count = f"/v1/workspaces/{a}/exec"
        mc = api.ok("POST", count, {"cmd": "i=0; trap 'i=$((i+100000))' USR1; "
                                           "while true; do i=$((i+1)); echo $i > /dev/shm/count; sleep 0.2; done",
                                    "background": True, "tag": "mcount"})
        r = api.exec(a, "echo before > /workspace/memnote && sleep 2 && cat /dev/shm/count")
        check(r["exit_code"] == 0, f"the counter: {r}")
        boot_id = api.exec(a, "cat /proc/sys/kernel/random/boot_id")["stdout"].strip()
        low = int(api.exec(a, "cat /dev/shm/count")["stdout"])
        t0 = time.monotonic()
        warm = api.ok("POST", f"/v1/workspaces/{a}/checkpoints", {"name": "warm", "memory": True})
        figures["memory_checkpoint_s"] = round(time.monotonic() - t0, 2)
        figures["memory_checkpoint_pause_ms"] = warm.get("pause_ms")
        check(warm["memory"] is True and isinstance(warm.get("pause_ms"), int)
              and 0 <= warm["pause_ms"] <= figures["memory_checkpoint_s"] * 1000 + 50, f"memory checkpoint: {warm}")
        check(api.ok("GET", f"/v1/workspaces/{a}")["state"] == "running", "not running after its memory checkpoint")
        mem = os.path.join(data, "workspaces", a, "checkpoints", warm["id"], "memory.save")
        st = os.stat(mem)
        check(st.st_uid == 0 and (st.st_mode & 0o077) == 0 and st.st_size > 1 << 20,
              f"{mem}: owner {st.st_uid} mode {oct(st.st_mode & 0o7777)} size {st.st_size}")
        check(warm["size_bytes"] >= st.st_blocks * 512, f"the memory is not in the size: {warm}")
        # Change both: the counter jumps, the file is rewritten.
        r = api.exec(a, f"kill -USR1 {mc['pid']} && echo after > /workspace/memnote && sync && sleep 1 && "
                        "cat /dev/shm/count")
        check(r["exit_code"] == 0 and int(r["stdout"]) > 100000, f"changing the counter: {r}")
        t0 = time.monotonic()
        back = api.ok("POST", f"/v1/workspaces/{a}/checkpoints/warm/restore")
        api.wait(a, "running", 300)
        figures["memory_restore_s"] = round(time.monotonic() - t0, 2)
        check(back["undo"] and back["undo"]["memory"] is True and back["undo"]["kind"] == "before_restore",
              f"memory restore: {back}")
        r = api.exec(a, "cat /dev/shm/count /workspace/memnote /proc/sys/kernel/random/boot_id")
        got = r["stdout"].split()
        check(r["exit_code"] == 0 and low <= int(got[0]) < 100000 and got[1] == "before" and got[2] == boot_id,
              f"after the memory restore (counter from {low}, boot {boot_id}): {r}")
        proc = api.ok("GET", f"/v1/workspaces/{a}/processes/mcount")
        check(proc["pid"] == mc["pid"] and proc["status"] == "running", f"the counter after the restore: {proc}")
        time.sleep(1.5)
        later = int(api.exec(a, "cat /dev/shm/count")["stdout"])
        check(int(got[0]) < later < 100000, f"the counter does not count on from the checkpoint: {got[0]} then {later}")
        log(f"memory checkpoint {figures['memory_checkpoint_s']} s (paused {warm['pause_ms']} ms); restore "
            f"{figures['memory_restore_s']} s: the counter resumed at {got[0]} (taken at >= {low}), same process "
            "and boot, the file as it was")
        # Undone: the state the restore left, with its memory (the counter past 100000).
        api.ok("POST", f"/v1/workspaces/{a}/checkpoints/{back['undo']['id']}/restore", {"undo": False})
        api.wait(a, "running", 300)
        r = api.exec(a, "cat /dev/shm/count /workspace/memnote /proc/sys/kernel/random/boot_id")
        got = r["stdout"].split()
        check(r["exit_code"] == 0 and int(got[0]) > 100000 and got[1] == "after" and got[2] == boot_id,
              f"after undoing the memory restore: {r}")
        log("undid the memory restore: the changed counter and file are back")

        # --- two forks of the memory checkpoint: the counter runs on in each, and each is a
        # machine of its own (machine-id, SSH host keys, MAC, hostname, agent token, the first
        # bytes of /dev/urandom) ---
        # What the guest says of itself; host keys made now stand in for an sshd's.
        ident = ("cat /etc/machine-id; cut -d' ' -f2 /etc/ssh/ssh_host_ed25519_key.pub; "
                 "cat /sys/class/net/e*/address | head -1; hostname; "
                 "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'; echo; "
                 "cat /dev/shm/count /workspace/memnote")
        r = api.exec(a, "sudo ssh-keygen -A >/dev/null && cut -d' ' -f2 /etc/ssh/ssh_host_ed25519_key.pub")
        check(r["exit_code"] == 0 and r["stdout"].strip(), f"host keys in the parent: {r}")
        t0 = time.monotonic()
        twin = api.ok("POST", f"/v1/workspaces/{a}/checkpoints", {"name": "twin", "memory": True})
        twin_count = int(api.exec(a, "cat /dev/shm/count")["stdout"])
        parent = api.exec(a, ident)["stdout"].split()
        made = api.ok("POST", f"/v1/workspaces/{a}/checkpoints/twin/fork", {"name": "e2e-fork", "count": 2})
        forks = [w["id"] for w in made["workspaces"]]
        ids.extend(forks)
        check([w["forked_from"] for w in made["workspaces"]] == [twin["id"]] * 2, f"forks: {made}")
        for f in forks:
            api.wait(f, "running", 300)
        figures["fork_two_s"] = round(time.monotonic() - t0, 2)
        seen = {"parent": parent}
        for f, w in zip(forks, made["workspaces"]):
            r = api.exec(f, ident)
            got = r["stdout"].split()
            check(r["exit_code"] == 0 and len(got) == 7, f"fork {w['name']}: {r}")
            check(got[3] == w["name"], f"fork {w['name']} is called {got[3]}")
            # The checkpoint's counter (past 100000: the undone state's; a new process would
            # count from 1), counting on; its file.
            check(int(got[5]) > 100000 and got[6] == "after",
                  f"fork {w['name']} did not resume the checkpoint's counter (about {twin_count}): {got}")
            proc = api.ok("GET", f"/v1/workspaces/{f}/processes/mcount")
            check(proc["pid"] == mc["pid"] and proc["status"] == "running", f"the counter in the fork: {proc}")
            seen[w["name"]] = got
        time.sleep(1.5)
        for f, w in zip(forks, made["workspaces"]):
            later = int(api.exec(f, "cat /dev/shm/count")["stdout"])
            check(later > int(seen[w["name"]][5]), f"the counter does not count on in {w['name']}: {later}")
        for i, what in enumerate(["machine-id", "SSH host key", "MAC", "hostname", "/dev/urandom bytes"]):
            values = [v[i] for v in seen.values()]
            check(len(set(values)) == len(values), f"the forks share their {what}: {values}")
        tokens = [open(os.path.join(data, "workspaces", i, "token")).read().strip() for i in [a] + forks]
        check(len(set(tokens)) == 3 and all(len(t) == 64 for t in tokens), "the forks share an agent token")
        # (The NIC is on QEMU's command line in the domain XML: virtio-net-pci,...,mac=...)
        macs = [re.findall(r"mac=([0-9a-f:]{17})", virsh("dumpxml", f"berth-{i}").stdout) for i in [a] + forks]
        check(all(len(m) == 1 for m in macs) and len({m[0] for m in macs}) == 3, f"the domains' MACs: {macs}")
        # Each fork's QEMU runs as its own uid, which reads the parent's frozen layers.
        fork_uids = {process_uids(f"guest=berth-{f},")[0] for f in forks}
        check(len(fork_uids) == 2 and process_uids(f"guest=berth-{a},")[0] not in fork_uids,
              f"the forks' QEMU uids: {fork_uids}")
        status, body = api.call("DELETE", f"/v1/workspaces/{a}/checkpoints/twin")
        check(status == 409 and "e2e-fork-1" in json.dumps(body), f"deleting the forks' checkpoint: {status} {body}")
        log(f"forked two from a memory checkpoint in {figures['fork_two_s']} s: the counter runs on in each, "
            "and machine-id, SSH host key, MAC, hostname, token and urandom differ")
        # --- a template with a server started: a workspace made from it answers on its port at
        # once, the server already running ---
        api.ok("POST", count, {"cmd": "cd /workspace && exec python3 -m http.server 8123 --bind 127.0.0.1",
                               "background": True, "tag": "server"})
        serve = "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8123/"
        deadline = time.monotonic() + 60
        while api.exec(a, serve)["stdout"] != "200":
            check(time.monotonic() < deadline, "the template's server did not come up")
            time.sleep(1)
        tpl = api.ok("POST", "/v1/templates", {"name": "e2e-tpl", "from": {"workspace": a}})
        check(tpl["workspace_id"] == a and tpl["image"] == "base", f"template: {tpl}")
        t0 = time.monotonic()
        made = api.ok("POST", "/v1/workspaces", {"name": "e2e-from-tpl", "template": "e2e-tpl"})
        ids.append(made["id"])
        api.wait(made["id"], "running", 300)
        figures["create_from_template_s"] = round(time.monotonic() - t0, 2)
        r = api.exec(made["id"], serve)
        check(r["stdout"] == "200", f"the server in the workspace made from the template: {r}")
        check(api.ok("GET", f"/v1/workspaces/{made['id']}")["forked_from"] == tpl["checkpoint_id"],
              "the template's workspace is no fork of its checkpoint")
        log(f"created a workspace from a template in {figures['create_from_template_s']} s (a cold boot here: "
            f"{figures['cold_start_s']} s); its server answered at once")
        forks.append(made["id"])
        for f in forks:
            api.ok("DELETE", f"/v1/workspaces/{f}")
        deadline = time.monotonic() + 180
        while any(api.call("GET", f"/v1/workspaces/{f}")[0] != 404 for f in forks):
            check(time.monotonic() < deadline, "deleting the forks did not finish")
            time.sleep(1)
        api.ok("DELETE", "/v1/templates/e2e-tpl")
        # --- a template built from a script: its own workspace installs a package and starts a
        # server; a workspace made from it has both, the server answering at once ---
        t0 = time.monotonic()
        tpl = api.ok("POST", "/v1/templates", {
            "name": "e2e-built",
            "script": "sudo apt-get install -y --no-install-recommends cowsay\n"
                      "mkdir -p ~/site && echo built > ~/site/index.html",
            "start": "cd ~/site && exec python3 -m http.server 8124 --bind 127.0.0.1",
            "ready": "curl -sf http://127.0.0.1:8124/",
            "timeout_s": 900})
        check(tpl["state"] == "building" and tpl["workspace"] == "template-e2e-built",
              f"the built template: {tpl}")
        builder = tpl["workspace_id"]
        ids.append(builder)
        deadline = time.monotonic() + 960
        while (tpl := api.ok("GET", "/v1/templates/e2e-built"))["state"] == "building":
            check(time.monotonic() < deadline, "the template's build did not end")
            time.sleep(2)
        check(tpl["state"] == "ready", f"the template's build: {tpl.get('error')}: {tpl.get('build_log', '')[-2000:]}")
        figures["template_build_s"] = round(time.monotonic() - t0, 1)
        api.wait(builder, "stopped", 300)
        t0 = time.monotonic()
        made = api.ok("POST", "/v1/workspaces", {"name": "e2e-from-built", "template": "e2e-built"})
        ids.append(made["id"])
        api.wait(made["id"], "running", 300)
        figures["create_from_built_template_s"] = round(time.monotonic() - t0, 2)
        r = api.exec(made["id"], "curl -s http://127.0.0.1:8124/; /usr/games/cowsay moo | head -2 | tail -1")
        check(r["exit_code"] == 0 and r["stdout"].split()[:2] == ["built", "<"], f"what the template built: {r}")
        log(f"built a template from a script in {figures['template_build_s']} s (a package installed, a server "
            f"started); a workspace from it answered on that server {figures['create_from_built_template_s']} s "
            "after the create")
        api.ok("DELETE", f"/v1/workspaces/{made['id']}")
        deadline = time.monotonic() + 180
        while api.call("GET", f"/v1/workspaces/{made['id']}")[0] != 404:
            check(time.monotonic() < deadline, "deleting the workspace made from the built template did not finish")
            time.sleep(1)
        # Deleting the template deletes the workspace berthd built it in.
        api.ok("DELETE", "/v1/templates/e2e-built")
        deadline = time.monotonic() + 180
        while api.call("GET", f"/v1/workspaces/{builder}")[0] != 404:
            check(time.monotonic() < deadline, "the built template's workspace did not go with it")
            time.sleep(1)
        # The hibernated workspace's checkpoint resumes too: its boot, its counter, no /dev/shm
        # count yet; and back again through the undo.
        t0 = time.monotonic()
        back = api.ok("POST", f"/v1/workspaces/{a}/checkpoints/asleep/restore")
        api.wait(a, "running", 300)
        figures["memory_restore_hibernated_s"] = round(time.monotonic() - t0, 2)
        r = api.exec(a, "test -e /dev/shm/count && echo counting || echo none; cat /proc/sys/kernel/random/boot_id")
        check(r["stdout"].split() == ["none", hib_boot], f"after restoring the hibernated checkpoint: {r}")
        proc = api.ok("GET", f"/v1/workspaces/{a}/processes/counter")
        check(proc["pid"] == bg["pid"] and proc["status"] == "running", f"its counter: {proc}")
        api.ok("POST", f"/v1/workspaces/{a}/checkpoints/{back['undo']['id']}/restore", {"undo": False})
        api.wait(a, "running", 300)
        r = api.exec(a, "cat /dev/shm/count /workspace/memnote")
        check(r["exit_code"] == 0 and int(r["stdout"].split()[0]) > 100000 and r["stdout"].split()[1] == "after",
              f"back from the hibernated checkpoint: {r}")
        log(f"restored the hibernated checkpoint in {figures['memory_restore_hibernated_s']} s (its boot and "
            "process), and came back")

        # --- the agent token stays secret; SIGTERM leaves the VMs running -------------------
        token = open(os.path.join(data, "workspaces", a, "token")).read().strip()
        check(len(token) == 64, "the agent token is not 256 bits of hex")
        check((os.stat(os.path.join(data, "workspaces", a, "token")).st_mode & 0o077) == 0,
              "the token file is readable by others")
        check(token not in open(os.path.join(data, "berthd.log")).read(), "the token is in the log")
        check(token not in json.dumps(api.ok("GET", f"/v1/workspaces/{a}")), "the token is in the API")
        qemu_args = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        check(token not in qemu_args, "the token is on a command line")
        # The console (a guest writes to it at will) goes through virtlogd, which rolls it over at
        # its max_size (2 MiB by default, 3 old files): QEMU holds no file of its own to fill.
        qemu_line = next((l for l in qemu_args.splitlines()
                          if "qemu-system" in l and f"guest=berth-{a}," in l), "")
        check("id=charserial0,path=/dev/fdset/" in qemu_line,
              f"the console is not a virtlogd file: {qemu_line[:300]}")
        console = os.stat(os.path.join(data, "workspaces", a, "console.log"))
        check((console.st_mode & 0o077) == 0,
              f"console.log: owner {console.st_uid} mode {oct(console.st_mode & 0o7777)}")
        berthd.stop()
        check(berthd.proc.returncode == 0, f"berthd exited {berthd.proc.returncode} on SIGTERM")
        check(virsh("domstate", f"berth-{a}").stdout.strip() == "running", "SIGTERM stopped the VM")
        url = berthd.start()
        api = Api(url, key)
        check(api.ok("GET", f"/v1/workspaces/{a}")["state"] == "running", "not running after restart")
        # (The note is the restored checkpoint's: "changed".)
        r = api.exec(a, "cat /workspace/note")
        check(r["stdout"].strip() == "changed", f"exec after restart: {r}")
        log("token secret; SIGTERM left the VM running and a new berthd took it over")

        # --- another tenant sees nothing ----------------------------------------------------
        api.ok("POST", "/v1/tenants", {"name": "e2e-other"})
        other = Api(url, api.ok("POST", "/v1/keys", {"tenant": "e2e-other", "scope": "write"})["key"])
        for method, path in (("GET", f"/v1/workspaces/{a}"), ("GET", "/v1/workspaces/e2e-a"),
                             ("POST", f"/v1/workspaces/{a}/exec")):
            status, _ = other.call(method, path, {"cmd": "true"} if method == "POST" else None)
            check(status == 404, f"other tenant: {method} {path} -> {status}")
        check(other.ok("GET", "/v1/workspaces")["workspaces"] == [], "other tenant lists workspaces")

        # --- delete -------------------------------------------------------------------------
        api.ok("DELETE", f"/v1/workspaces/{a}")
        deadline = time.monotonic() + 180
        while any(api.call("GET", f"/v1/workspaces/{i}")[0] != 404 for i in ids):
            check(time.monotonic() < deadline, "delete did not finish")
            time.sleep(1)
        check(our_domains(ids) == [], f"domains left: {our_domains(ids)}")
        check(os.listdir(os.path.join(data, "workspaces")) == [], "workspace files left")
        usage = api.ok("GET", "/v1/usage")
        check(usage["total"]["seconds"] > 0, f"usage: {usage}")
        log(f"figures: {json.dumps(figures)}")
        print(f"PASS {T} in {time.monotonic() - t_start:.0f} s ({berthd.ran()})")
        return 0
    except (Failure, OSError, subprocess.CalledProcessError, KeyError, ValueError) as e:
        print(f"FAIL {T} ({berthd.ran()}): {e}")
        try:
            print("---- berthd log tail ----")
            print("".join(open(os.path.join(data, "berthd.log")).readlines()[-40:]))
            for i in ids:
                console = os.path.join(data, "workspaces", i, "console.log")
                if os.path.exists(console):
                    print(f"---- {i} console tail ----")
                    print("".join(open(console, errors="replace").readlines()[-25:]))
        except OSError:
            pass
        return 1
    finally:
        berthd.stop()
        for i in ids:
            virsh("destroy", f"berth-{i}")
            virsh("undefine", f"berth-{i}", "--managed-save", "--nvram")
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
