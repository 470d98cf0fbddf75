"""What the host holds for one crash-suite run, found precisely: other berthds run on this
machine, so a domain is ours only when one of its disks lies under our run directory, and a
process only when its command line names that directory. Also the clean-up that removes all of
it (domains with their save images, agents, berthd, files), used at start (for runs that were
killed before they could clean up) and at exit."""

import fcntl
import http.client
import json
import os
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import time
from xml.etree import ElementTree

ROOT = "/tmp/berth-crash"  # every run's directory is below this
URI = "qemu:///system"


def virsh(*args, check=False):
    r = subprocess.run(["virsh", "-q", "-c", URI, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"virsh {' '.join(args)}: {r.stderr.strip()}")
    return r


class Domains:
    """libvirt's domains of one run. Whether a name is ours is decided once (its disks' paths)
    and remembered: a domain's name never moves to another berthd."""

    def __init__(self, run_dir):
        self.run_dir = run_dir.rstrip("/") + "/"
        self._ours = {}

    def _is_ours(self, name):
        if name not in self._ours:
            r = virsh("domblklist", "--details", name)
            if r.returncode != 0:
                return False  # gone meanwhile: not cached, it may come back
            paths = [line.split()[-1] for line in r.stdout.splitlines() if line.strip()]
            self._ours[name] = any(p.startswith(self.run_dir) for p in paths)
        return self._ours[name]

    def states(self):
        """{name: 'running' | 'shut off' | 'saved' | 'paused' | ...} for our berth-ws_ domains."""
        r = virsh("list", "--all", "--managed-save", check=True)
        out = {}
        for line in r.stdout.splitlines():
            parts = line.split(None, 2)
            if len(parts) < 3 or not parts[1].startswith("berth-ws_"):
                continue
            if self._is_ours(parts[1]):
                out[parts[1]] = parts[2].strip()
        return out

    def remove_all(self):
        """Destroys and undefines (with the save image) every domain of ours; returns names."""
        gone = []
        for name, state in self.states().items():
            if state not in ("shut off", "saved"):
                virsh("destroy", name)
            virsh("undefine", "--managed-save", name)
            gone.append(name)
        return gone


def disk_sources(name):
    """{target: file} of a domain's disks ("vda": root, "vdb": data): the live definition of a
    running domain, else the stored one. {} when libvirt has no such domain."""
    r = virsh("domblklist", name)
    out = {}
    for line in r.stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2:
            out[parts[0]] = parts[1].strip()
    return out


def saved_disk_sources(name):
    """{target: file} of the disks a hibernated domain resumes onto: its managed save's own
    definition (virsh managedsave-dumpxml), which may differ from the stored one."""
    r = virsh("managedsave-dumpxml", name)
    out = {}
    try:
        for disk in ElementTree.fromstring(r.stdout).iter("disk"):
            target, source = disk.find("target"), disk.find("source")
            if target is not None and source is not None and source.get("file"):
                out[target.get("dev")] = source.get("file")
    except ElementTree.ParseError:
        pass
    return out


def libvirt_jobs(data_dir, domains):
    """What libvirt still does for a berthd that was killed: its helpers writing or reading
    files under our data directory (a memory checkpoint's or a hibernation's save image) and
    the jobs of our domains (`domains`: {name: state}). A SIGKILL ends berthd, not the job it
    asked libvirtd for; [] when there are none."""
    busy = [f"pid {pid} ({' '.join(argv)[:160]})" for pid, argv in processes_under(data_dir)
            if os.path.basename(argv[0]) == "libvirt_iohelper"]
    for name, state in sorted(domains.items()):
        if state in ("running", "paused"):
            job = virsh("domjobinfo", name).stdout.splitlines()
            kind = job[0].split(":", 1)[1].strip() if job and ":" in job[0] else "None"
            if kind != "None":
                busy.append(f"{name}: a job ({kind})")
    return busy


def read_store(data_dir):
    """What berthd's store (read-only) says of each workspace's disks: {ws id: {"name",
    "state", "disk_gen", "disk_parent", "resume_memory", "from_checkpoint", "fresh_identity",
    "net_uid", "checkpoints": {id: row}}}, a row being {"state", "gen", "parent", "memory",
    "kind"}. A fork's from_checkpoint is a row of its source (another workspace)."""
    db = sqlite3.connect(f"file:{os.path.join(data_dir, 'berth.db')}?mode=ro", uri=True, timeout=10)
    try:
        out = {}
        for ws_id, name, state, gen, parent, resume, source, fresh, uid in db.execute(
                "SELECT id, name, state, disk_gen, disk_parent, resume_memory, from_checkpoint, "
                "fresh_identity, net_uid FROM workspaces"):
            out[ws_id] = {"name": name, "state": state, "disk_gen": gen, "disk_parent": parent,
                          "resume_memory": resume, "from_checkpoint": source,
                          "fresh_identity": bool(fresh), "net_uid": uid, "checkpoints": {}}
        for cp_id, ws_id, state, gen, parent, memory, kind in db.execute(
                "SELECT id, workspace_id, state, gen, parent, memory, kind FROM checkpoints"):
            if ws_id in out:
                out[ws_id]["checkpoints"][cp_id] = {"state": state, "gen": gen, "parent": parent,
                                                    "memory": bool(memory), "kind": kind}
        return out
    finally:
        db.close()


def backing_chain(path, shared):
    """The files a qcow2 layer reads through, itself first (qemu-img info --backing-chain),
    or an error string: a backing file that is missing or unreadable fails it. `shared`: the
    image is open in a QEMU (its lock is shared, -U)."""
    argv = ["qemu-img", "info", "--backing-chain", "--output=json", *(["-U"] if shared else []), path]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        return f"qemu-img info --backing-chain {path}: {r.stderr.strip()}"
    try:
        return [layer["filename"] for layer in json.loads(r.stdout)]
    except (ValueError, KeyError, TypeError) as e:
        return f"qemu-img info --backing-chain {path}: {e!r}"


def qcow2_check(path):
    """None when `qemu-img check` finds the image consistent, else its complaint."""
    r = subprocess.run(["qemu-img", "check", "-q", path], capture_output=True, text=True)
    if r.returncode == 0:
        return None
    return f"qemu-img check {path}: exit {r.returncode}: {(r.stdout + r.stderr).strip()[:300]}"


def read_token(path):
    """The agent token in a file (a workspace's token, a checkpoint's), or None."""
    try:
        with open(path) as f:
            return f.readline().strip() or None
    except OSError:
        return None


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def agent_status(socket_path, token, timeout=5):
    """The HTTP status the host agent on `socket_path` answers an authenticated request with
    (GET /v1/activity: berthd's idle poll, which counts as no activity) carrying `token`:
    200 when the agent holds that token, 401 when it holds another; or the error as a string."""
    conn = _UnixConnection(socket_path, timeout)
    try:
        conn.request("GET", "/v1/activity", headers={"Authorization": f"Bearer {token}"})
        res = conn.getresponse()
        res.read()
        return res.status
    except (OSError, http.client.HTTPException) as e:
        return repr(e)
    finally:
        conn.close()


ACL_USER = 0x02  # linux/posix_acl_xattr.h: a named user's entry


def acl_users(path):
    """The uids a POSIX ACL on `path` names (system.posix_acl_access: a version, then 8-byte
    entries tag/perm/id); [] without one."""
    try:
        raw = os.getxattr(path, "system.posix_acl_access", follow_symlinks=False)
    except OSError:
        return []
    out = []
    for at in range(4, len(raw) - 7, 8):
        tag, _perm, uid = struct.unpack_from("<HHI", raw, at)
        if tag == ACL_USER:
            out.append(uid)
    return out


def processes_under(path):
    """[(pid, argv)] of every process whose command line names `path` (not this one)."""
    needle = path.rstrip("/") + "/"
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        argv = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
        if any(needle in a or a == path for a in argv):
            out.append((int(entry), argv))
    return out


def kill_pids(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                # Our own children must be reaped; for others, wait until they are gone.
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            except ChildProcessError:
                pass
            if not os.path.exists(f"/proc/{pid}") or _zombie(pid):
                break
            time.sleep(0.02)


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def clean_run(run_dir):
    """Removes everything a run left: its domains (destroyed, undefined with their save
    images), then every process naming its directory (berthd, agents, a stray qemu-img), then
    the directory. Returns what it removed, for the log."""
    removed = Domains(run_dir).remove_all()
    procs = processes_under(run_dir)
    kill_pids([pid for pid, _ in procs])
    removed += [f"pid {pid} ({os.path.basename(argv[0])})" for pid, argv in procs]
    shutil.rmtree(run_dir, ignore_errors=True)
    return removed


def new_run_dir():
    """Cleans up after runs whose suite died (their lock is free) and makes this run's
    directory, locked for as long as this process lives. Returns (path, lock file)."""
    os.makedirs(ROOT, exist_ok=True)
    os.chmod(ROOT, 0o711)  # QEMU (libvirt-qemu) traverses to the disks
    for name in sorted(os.listdir(ROOT)):
        path = os.path.join(ROOT, name)
        if not name.startswith("run-") or not os.path.isdir(path):
            continue
        try:
            fd = os.open(os.path.join(path, "suite.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            fd = None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue  # a live run of another suite process
        removed = clean_run(path)
        if fd is not None:
            os.close(fd)
        print(f"cleaned up after an earlier run that was killed: {path} ({len(removed)} leftovers: "
              f"{', '.join(removed) or 'files only'})", flush=True)
    # Locked under a name the scan above skips, then renamed: another suite starting now never
    # sees this directory unlocked.
    tmp = os.path.join(ROOT, f".new-{os.getpid()}")
    os.makedirs(tmp)
    os.chmod(tmp, 0o711)
    lock = open(os.path.join(tmp, "suite.lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    path = os.path.join(ROOT, f"run-{os.getpid()}-{int(time.time())}")
    os.rename(tmp, path)
    return path, lock
