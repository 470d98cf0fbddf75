"""The crash suite's invariants, checked after every restart once the workspaces settled.
Each check returns a list of failures (strings); an empty list is a pass."""

import os
import re
import stat

import host_state

SETTLED = {"running", "stopped", "hibernated", "error"}

# The lifecycle (DESIGN.md, "Workspace lifecycle", and reconcile.cc's table): the states an
# event may leave a workspace in, after the state the previous event left it in.
NEXT = {
    "creating": {"starting", "error", "deleting"},
    "starting": {"running", "error", "stopping", "deleting"},
    "running": {"stopping", "hibernating", "deleting", "stopped", "hibernated", "error"},
    "stopping": {"stopped", "error", "deleting"},
    "stopped": {"starting", "deleting"},
    "hibernating": {"hibernated", "running", "error", "stopped", "deleting"},
    "hibernated": {"starting", "stopping", "deleting", "stopped"},
    "error": {"starting", "stopping", "deleting"},
    "deleting": set(),
}
# Events that record a change of something other than the state (the checkpoint events name
# the state the workspace is in when its disks change).
SAME_STATE_EVENTS = {"updated", "network_policy", "checkpoint", "checkpoint_deleted", "restored"}

# What an accepted operation ends in, whatever happens to berthd meanwhile (None: gone).
TARGET = {"create": "running", "start": "running", "resume": "running", "stop": "stopped",
          "hibernate": "hibernated", "delete": None}


class Timeline:
    """One workspace's events, read as they come, and the states the API reported for it."""

    def __init__(self, ws_id):
        self.ws_id = ws_id
        self.state = None        # the state the last event left it in
        self.deleted = False
        self.states = []         # every state an event left it in, in order
        self.mark = 0            # where the states of the current kill begin
        self.count = 0

    def add(self, event):
        """Takes the next event (id order); returns failures."""
        failures = []
        self.count += 1
        kind, data = event["type"], event.get("data") or {}
        where = f"{self.ws_id} event {event['id']} ({kind})"
        if self.deleted:
            return [f"{where} after 'deleted'"]
        if self.state is None and kind != "created":
            failures.append(f"{where}: the first event is not 'created'")
        if kind == "deleted":
            if self.state != "deleting":
                failures.append(f"{where}: deleted while {self.state}, not deleting")
            self.deleted = True
            return failures
        state = data.get("state")
        if state is None:
            if kind in ("created", "started", "stopped", "hibernated", "deleting", "starting",
                        "stopping", "hibernating", "reconciled"):
                failures.append(f"{where}: a transition event without the state it left")
            return failures  # boot_retry, kvm_fallback, an error that changed no state
        if kind == "error" and state == self.state:
            # Not a transition: something failed and was worked around (a checkpoint's memory
            # the hypervisor refused, booted from its disks instead). Nothing here may fail.
            failures.append(f"{where} in {state}: {event.get('message', '')}")
        elif self.state is None:
            if state != "creating":
                failures.append(f"{where}: created in state {state}")
        elif state == self.state:
            if kind not in SAME_STATE_EVENTS:
                failures.append(f"{where}: {state} again (a duplicate transition)")
        elif state not in NEXT.get(self.state, set()):
            failures.append(f"{where}: {self.state} -> {state} is no transition of the lifecycle "
                            f"(an event is missing)")
        self.state = state
        self.states.append(state)
        return failures


def check_observed(timeline, observed, since=0):
    """Every state the API reported for a workspace, in the order one reader saw them, is a
    subsequence of the states its events left it in (from index `since`)."""
    i = 0
    states = timeline.states[since:]
    for state in observed:
        while i < len(states) and states[i] != state:
            i += 1
        if i == len(states):
            return [f"{timeline.ws_id}: the API reported {state} (in {observed}) but no event in "
                    f"order says so (events: {states})"]
    return []


def check_files(data_dir, records):
    """No record without its directory, no workspace directory without a record, no
    half-written file left in a settled workspace (a .tmp; a fork's rebound memory, fork.save)
    (which disks it must have: check_disks)."""
    failures = []
    root = os.path.join(data_dir, "workspaces")
    dirs = set(os.listdir(root)) if os.path.isdir(root) else set()
    for ws in records.values():
        d = os.path.join(root, ws["id"])
        if ws["id"] not in dirs:
            failures.append(f"{ws['id']} ({ws['state']}): record without its directory")
            continue
        files = set(os.listdir(d))
        # (fork.save: a fork's rebound memory, gone once libvirtd restored it and at start-up)
        stray = sorted(f for f in files if f.endswith(".tmp") or f == "fork.save")
        if stray:
            failures.append(f"{ws['id']} ({ws['state']}): half-written files left: {stray}")
    for d in sorted(dirs - set(records)):
        failures.append(f"workspace directory {d} without a record ({sorted(os.listdir(os.path.join(root, d)))})")
    return failures


def check_domains(domains, records):
    """Each record's domain agrees with its state; no domain of ours without a record."""
    failures = []
    want = {"running": {"running"}, "stopped": {"shut off"}, "hibernated": {"saved"}}
    for ws in records.values():
        name = "berth-" + ws["id"]
        have = domains.get(name)
        if have is None:
            failures.append(f"{ws['id']} ({ws['state']}): record without its libvirt domain")
        elif ws["state"] in want and have not in want[ws["state"]]:
            failures.append(f"{ws['id']}: berthd says {ws['state']}, libvirt says {have}")
    for name in sorted(set(domains) - {"berth-" + i for i in records}):
        failures.append(f"domain {name} ({domains[name]}) without a record")
    return failures


def check_processes(procs, records, data_dir, berthd_pid):
    """Host agents (the unix transport's stand-in for a guest) run exactly for the workspaces
    that are running or hibernated, one each; nothing else of ours runs but berthd and QEMU."""
    failures = []
    agents = {}
    for pid, argv in procs:
        exe = os.path.basename(argv[0])
        if pid == berthd_pid or exe.startswith("qemu-system"):
            continue
        if exe == "berth-agent" and "--listen" in argv:
            listen = argv[argv.index("--listen") + 1]
            ws_id = os.path.basename(os.path.dirname(listen.removeprefix("unix:")))
            agents.setdefault(ws_id, []).append(pid)
            continue
        failures.append(f"stray process {pid}: {' '.join(argv)[:200]}")
    for ws_id, pids in sorted(agents.items()):
        ws = records.get(ws_id)
        if ws is None:
            failures.append(f"agent(s) {pids} of {ws_id}, which has no record")
        elif ws["state"] not in ("running", "hibernated"):
            failures.append(f"agent(s) {pids} of {ws_id}, which is {ws['state']}")
        elif len(pids) > 1:
            failures.append(f"{len(pids)} agents of {ws_id}: {pids}")
    for ws in records.values():
        if ws["state"] in ("running", "hibernated") and ws["id"] not in agents:
            failures.append(f"{ws['id']} is {ws['state']} but its agent is not running")
    return failures


# --- checkpoints: every checkpoint whole or gone ------------------------------------------------

LAYER = re.compile(r"^(root|data)(?:\.g([1-9][0-9]*))?\.qcow2$")


def layer_name(disk, gen):
    """layout.h's names: root.qcow2 for generation 0, root.g7.qcow2 for 7."""
    return f"{disk}.qcow2" if gen == 0 else f"{disk}.g{gen}.qcow2"


def checkpoint_owner(store, cp_id):
    """The workspace whose ready checkpoint `cp_id` is, or None."""
    for ws_id, s in store.items():
        r = s["checkpoints"].get(cp_id)
        if r is not None and r["state"] == "ready":
            return ws_id
    return None


def layer_chain(store, ws_id, gen, parent):
    """The layers, [(workspace, generation)], that a layer of generation `gen` standing on
    checkpoint `parent` reads, itself first: down its workspace's ready checkpoints, then, at
    the bottom of a fork's own layers, on into its source's checkpoint and what that stands on
    (a fork of a fork: further). It stops where the store names no ready checkpoint (said
    elsewhere)."""
    out, seen = [], set()
    while (ws_id, gen) not in seen:
        seen.add((ws_id, gen))
        out.append((ws_id, gen))
        s = store[ws_id]
        if parent is None:
            # The bottom of this workspace's own layers: a fork's stand on its source's.
            parent = s["from_checkpoint"]
            ws_id = checkpoint_owner(store, parent) if parent else None
            if ws_id is None:
                break
            s = store[ws_id]
        r = s["checkpoints"].get(parent)
        if r is None or r["state"] != "ready":
            break
        gen, parent = r["gen"], r["parent"]
    return out


def check_disks(data_dir, records, store):
    """Each settled workspace's files agree with what the store says of its disks (after
    berthd's start-up, ReconcileDisks, has run): no checkpoint row still 'taking'; each ready
    checkpoint owns the layers of its generation (and, with memory, checkpoints/<id>/ with its
    memory.save and token), the top is generation disk_gen, and every owned file exists while
    nothing else is there; checkpoint layers are frozen (read-only); disk_parent, each row's
    parent and resume_memory name ready checkpoints (resume_memory one with memory, and never
    for a running workspace, whose boot cleared it; a fork's may name its source's); each
    layer's backing chain (qemu-img) is the store's chain of parents (layer_chain: a fork's
    going on into its source's checkpoint, in the source's directory), down to the image for
    root and to nothing for data; a
    stopped workspace's tops pass qemu-img check; a running or hibernated domain's disks are
    the tops."""
    failures = []
    for ws in records.values():
        if ws["state"] not in ("running", "stopped", "hibernated"):
            continue  # error is reported by itself; a transition is not settled
        ws_id = ws["id"]
        s = store.get(ws_id)
        if s is None:
            failures.append(f"{ws_id}: listed by the API but not in the store")
            continue
        d = os.path.join(data_dir, "workspaces", ws_id)
        if not os.path.isdir(d):
            continue  # check_files says so
        where = f"{ws_id} ({ws['state']}, top g{s['disk_gen']})"
        rows = s["checkpoints"]
        ready = {i: r for i, r in rows.items() if r["state"] == "ready"}
        for cp_id, r in rows.items():
            if r["state"] != "ready":
                failures.append(f"{where}: checkpoint {cp_id} is still '{r['state']}' after the start-up")
        owner = {s["disk_gen"]: "the top"}
        for cp_id, r in sorted(ready.items()):
            if r["gen"] in owner:
                failures.append(f"{where}: generation {r['gen']} is both {owner[r['gen']]}'s and {cp_id}'s")
            else:
                owner[r["gen"]] = cp_id
            if r["parent"] is not None and r["parent"] not in ready:
                failures.append(f"{where}: checkpoint {cp_id} stands on {r['parent']}, which is no ready checkpoint")
        if s["disk_parent"] is not None and s["disk_parent"] not in ready:
            failures.append(f"{where}: the top stands on {s['disk_parent']}, which is no ready checkpoint")
        resume = s["resume_memory"]
        if resume is not None:
            # A fork's first boot resumes its source's checkpoint's memory.
            source = checkpoint_owner(store, resume) if resume == s["from_checkpoint"] else ws_id
            row = store[source]["checkpoints"].get(resume) if source else None
            if row is None or row["state"] != "ready" or not row["memory"]:
                failures.append(f"{where}: resume_memory names {resume}, which is no ready checkpoint with memory")
            elif ws["state"] == "running":
                failures.append(f"{where}: running, and resume_memory still names {resume}")

        # The files: exactly the owned layers, none half-made, the checkpoints' frozen.
        files = set(os.listdir(d))
        for name in sorted(files):
            m = LAYER.match(name)
            if m and int(m.group(2) or 0) not in owner:
                failures.append(f"{where}: layer {name}, which neither the top nor a ready checkpoint owns")
        for gen, who in sorted(owner.items()):
            for disk in ("root", "data"):
                name = layer_name(disk, gen)
                if name not in files:
                    failures.append(f"{where}: {name} ({who}'s) is missing")
                elif gen != s["disk_gen"]:
                    mode = os.stat(os.path.join(d, name)).st_mode
                    if mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
                        failures.append(f"{where}: {name} ({who}'s) is writable ({oct(mode & 0o777)}), not frozen")
        cps_dir = os.path.join(d, "checkpoints")
        have = set(os.listdir(cps_dir)) if os.path.isdir(cps_dir) else set()
        want = {i for i, r in ready.items() if r["memory"]}
        for cp_id in sorted(have - want):
            failures.append(f"{where}: checkpoints/{cp_id}, which no ready checkpoint with memory owns")
        for cp_id in sorted(want):
            for name in ("memory.save", "token"):
                path = os.path.join(cps_dir, cp_id, name)
                if not os.path.isfile(path) or os.path.getsize(path) == 0:
                    failures.append(f"{where}: checkpoint {cp_id} has memory but no (or an empty) {name}")

        # The chains, as qemu-img reads them, are the store's: each layer's own workspace's
        # down its parents, and a fork's on through its source's checkpoint (whose frozen layers
        # stay in the source's directory, the source's).
        leaves = {s["disk_gen"]: layer_chain(store, ws_id, s["disk_gen"], s["disk_parent"])}
        under = {s["disk_parent"]} | {r["parent"] for r in ready.values()}
        for cp_id, r in ready.items():
            if cp_id not in under:
                leaves[r["gen"]] = layer_chain(store, ws_id, r["gen"], r["parent"])
        shared = ws["state"] != "stopped"
        root = os.path.normpath(os.path.join(data_dir, "workspaces"))

        def short(f):  # a layer of this workspace by its name, another's as <id>/<name>
            return os.path.basename(f) if os.path.dirname(f) == os.path.normpath(d) else os.path.relpath(f, root)
        for gen, gens in sorted(leaves.items()):
            for disk in ("root", "data"):
                top = os.path.join(d, layer_name(disk, gen))
                if not os.path.exists(top):
                    continue  # missing: said above
                chain = host_state.backing_chain(top, shared)
                if isinstance(chain, str):
                    failures.append(f"{where}: {chain}")
                    continue
                want_chain = [os.path.join(root, w, layer_name(disk, g)) for w, g in gens]
                have_chain = [os.path.normpath(f) for f in chain]
                layers = []
                for f in have_chain:
                    if os.path.dirname(os.path.dirname(f)) != root:
                        break
                    layers.append(f)
                beyond = have_chain[len(layers):]
                if layers != want_chain:
                    failures.append(f"{where}: {layer_name(disk, gen)} reads through "
                                    f"{[short(f) for f in have_chain]}, the store says "
                                    f"{[short(f) for f in want_chain]}")
                elif disk == "root" and not beyond:
                    failures.append(f"{where}: {layer_name(disk, gen)} stands on no image disk")
                elif disk == "data" and beyond:
                    failures.append(f"{where}: {layer_name(disk, gen)} stands on {beyond}, beyond its own layers")
        if ws["state"] == "stopped":
            for disk in ("root", "data"):
                top = os.path.join(d, layer_name(disk, s["disk_gen"]))
                if os.path.exists(top):
                    complaint = host_state.qcow2_check(top)
                    if complaint:
                        failures.append(f"{where}: {complaint}")
        else:
            # Running: the live definition. Hibernated: the managed save's (what it resumes
            # onto) and the stored one (berthd's RedefineSave points both at the new tops "so
            # that nothing reads the old tops as this domain's").
            views = [("the domain's", host_state.disk_sources("berth-" + ws_id))]
            if ws["state"] == "hibernated":
                views.insert(0, ("the managed save's", host_state.saved_disk_sources("berth-" + ws_id)))
                views[1] = ("the stored definition's", views[1][1])
            for what, on in views:
                for target, disk in (("vda", "root"), ("vdb", "data")):
                    want_file = os.path.join(d, layer_name(disk, s["disk_gen"]))
                    if os.path.normpath(on.get(target, "-")) != want_file:
                        failures.append(f"{where}: {what} {target} is {on.get(target)}, not the top {want_file}")
    return failures


def check_listed(ws_id, listed, store):
    """The API lists exactly the store's ready checkpoints of the workspace."""
    s = store.get(ws_id)
    if s is None:
        return []
    ready = {i for i, r in s["checkpoints"].items() if r["state"] == "ready"}
    if set(listed) != ready:
        return [f"{ws_id}: the API lists checkpoints {sorted(listed)}, the store has ready {sorted(ready)}"]
    return []


# --- forks: whole or gone, and each a machine of its own ------------------------------------------

def check_forks(data_dir, records, store):
    """Every fork (a workspace whose store row names from_checkpoint) stands on a ready
    checkpoint of a listed workspace other than itself, its source, and the API says so
    (forked_from); once it ran, its identity was given (fresh_identity cleared: it is running or
    hibernated). A running one is a machine of its own: its identity's hostname (the host
    agent's --identity-root, <dir>/identity/etc/hostname) is its name, its token file is
    neither its source's nor the checkpoint's (the one a memory fork's agent resumed with), and
    its agent takes its own token and refuses those (401). Its disks' chains going on into the
    checkpoint's frozen layers is check_disks'."""
    failures = []
    root = os.path.join(data_dir, "workspaces")
    for ws_id, s in sorted(store.items()):
        cp_id = s["from_checkpoint"]
        ws = records.get(ws_id)
        if cp_id is None or ws is None:
            continue
        where = f"fork {ws_id} ({ws['state']}) of checkpoint {cp_id}"
        if ws.get("forked_from") != cp_id:
            failures.append(f"{where}: the API says it is forked from {ws.get('forked_from')}")
        source = checkpoint_owner(store, cp_id)
        if source is None or source == ws_id:
            failures.append(f"{where}: the checkpoint is no ready checkpoint of another workspace "
                            f"({'its own' if source else 'none has it'}): its disks stand on nothing whole")
            continue
        if source not in records:
            failures.append(f"{where}: its source {source} is not listed")
        if ws["state"] in ("running", "hibernated") and s["fresh_identity"]:
            failures.append(f"{where}: it ran, and the store still says fresh_identity (no identity of its own)")
        if ws["state"] != "running":
            continue
        d = os.path.join(root, ws_id)
        try:
            with open(os.path.join(d, "identity", "etc", "hostname")) as f:
                hostname = f.read().strip()
        except OSError as e:
            hostname = repr(e)
        if hostname != ws["name"]:
            failures.append(f"{where}: its identity's hostname is {hostname!r}, not its name {ws['name']!r}")
        token = host_state.read_token(os.path.join(d, "token"))
        theirs = {"its source's": host_state.read_token(os.path.join(root, source, "token"))}
        if store[source]["checkpoints"][cp_id]["memory"]:
            theirs["the checkpoint's"] = host_state.read_token(
                os.path.join(root, source, "checkpoints", cp_id, "token"))
        if token is None:
            failures.append(f"{where}: running, and it has no token file")
            continue
        sock = os.path.join(d, "agent.sock")
        answer = host_state.agent_status(sock, token)
        if answer != 200:
            failures.append(f"{where}: its agent answers its own token with {answer}, not 200")
        for what, other in theirs.items():
            if other is None:
                continue
            if other == token:
                failures.append(f"{where}: its token is {what} (no identity of its own)")
                continue
            answer = host_state.agent_status(sock, other)
            if answer != 401:
                failures.append(f"{where}: its agent answers {what} token with {answer}, not 401")
    return failures


def check_layer_readers(data_dir, records, store):
    """The POSIX ACL readers of each settled workspace's frozen layers (transport.cc's
    SetLayerReader: a fork's QEMU reads its source's layers by its uid's entry) are only the
    uids of workspaces that read them: their owner and the forks whose chains go through them,
    never a fork that is gone. (The crash suite's unix transport adds no entries; this guards
    against ones a fork's delete left.)"""
    failures = []
    readers = {}  # (workspace, gen) -> the net uids that may read it
    for ws_id, s in store.items():
        if s["net_uid"] is None:
            continue
        tops = [(s["disk_gen"], s["disk_parent"])] + [
            (r["gen"], r["parent"]) for r in s["checkpoints"].values() if r["state"] == "ready"]
        for gen, parent in tops:
            for layer in layer_chain(store, ws_id, gen, parent):
                readers.setdefault(layer, set()).add(s["net_uid"])
    for ws in records.values():
        s = store.get(ws["id"])
        if s is None or ws["state"] not in ("running", "stopped", "hibernated"):
            continue
        for r in s["checkpoints"].values():
            if r["state"] != "ready":
                continue
            for disk in ("root", "data"):
                path = os.path.join(data_dir, "workspaces", ws["id"], layer_name(disk, r["gen"]))
                stale = sorted(set(host_state.acl_users(path)) - readers.get((ws["id"], r["gen"]), set()))
                if stale:
                    failures.append(f"{ws['id']}: {layer_name(disk, r['gen'])} lets uids {stale} read it, "
                                    f"which no workspace reading it has")
    return failures
