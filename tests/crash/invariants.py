"""The crash suite's invariants, checked after every restart once the workspaces settled.
Each check returns a list of failures (strings); an empty list is a pass."""

import os

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
# Events that record a change of something other than the state.
SAME_STATE_EVENTS = {"updated", "network_policy"}

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
        if self.state is None:
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
    """No record without its disks, no workspace directory without a record, no half-written
    file left in a settled workspace."""
    failures = []
    root = os.path.join(data_dir, "workspaces")
    dirs = set(os.listdir(root)) if os.path.isdir(root) else set()
    for ws in records.values():
        d = os.path.join(root, ws["id"])
        if ws["id"] not in dirs:
            failures.append(f"{ws['id']} ({ws['state']}): record without its directory")
            continue
        files = set(os.listdir(d))
        for disk in ("root.qcow2", "data.qcow2"):
            if disk not in files and ws["state"] != "error":
                failures.append(f"{ws['id']} ({ws['state']}): record without {disk}")
        stray = sorted(f for f in files if f.endswith(".tmp"))
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
