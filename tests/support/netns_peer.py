"""A network namespace that stands for the world outside a guest, for the guest-network e2e test
and benchmark: a veth pair to the host, addresses on the peer's loopback, a server script
running inside it, and routes from the host to it. Only ranges nothing else on the host uses
are routed there (checked first), and routes that must not touch the host's own traffic (the
metadata address) go through an `ip rule` for the workspaces' uids only. A run that was
killed leaves all of it behind: the next one removes it before it starts.
"""

import subprocess
import sys

from berthd_harness import Failure, check

# berthd's default workspace uid range (controller/network/network_config.h).
WORKSPACE_UIDS = "2000000-2065535"


def sh(*args, check_rc=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check_rc and r.returncode != 0:
        raise Failure(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


class PeerNamespace:
    """`prefix` names the namespace (prefix-PID) and the veth (prefix0 on the host, prefix1 in
    the namespace). `routes`: CIDRs the host routes into the namespace; `uid_routes`: CIDRs
    routed there for the workspaces' uids only (table `table`). `server`: Python source run
    in the namespace, which prints "ready" once it serves."""

    def __init__(self, prefix, pid, host_addr, peer_addr, on_lo, routes, server, uid_routes=(),
                 table=4269):
        self.prefix, self.name = prefix, f"{prefix}-{pid}"
        self.host_if, self.peer_if = f"{prefix}0", f"{prefix}1"
        self.host_addr, self.peer_addr = host_addr, peer_addr
        self.on_lo, self.routes, self.uid_routes = list(on_lo), list(routes), list(uid_routes)
        self.server, self.table = server, str(table)
        self.uid_rule = ["uidrange", WORKSPACE_UIDS, "lookup", self.table, "priority", self.table]
        self.proc = None

    def clean_stale(self):
        """What a killed run left: the namespaces, the veth, the routes and the uid rule."""
        for line in sh("ip", "netns", "list", check_rc=False).stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith(self.prefix + "-"):
                sh("ip", "netns", "del", name, check_rc=False)
        for cidr in self.routes:
            sh("ip", "route", "del", cidr, "via", self.peer_addr, check_rc=False)
        if self.uid_routes:
            while sh("ip", "rule", "del", *self.uid_rule, check_rc=False).returncode == 0:
                pass
            sh("ip", "route", "flush", "table", self.table, check_rc=False)
        sh("ip", "link", "del", self.host_if, check_rc=False)

    def up(self):
        self.clean_stale()
        # Nothing of the host may be in a range the namespace takes over.
        for cidr in self.routes:
            probe = cidr.split("/")[0]
            used = sh("ip", "-4", "route", "show", "match", probe).stdout.splitlines()
            check(all(r.startswith("default") for r in used if r.strip()),
                  f"{cidr} is routed on this host already: {used}")
        sh("ip", "netns", "add", self.name)
        sh("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.peer_if,
           "netns", self.name)
        sh("ip", "addr", "add", f"{self.host_addr}/24", "dev", self.host_if)
        sh("ip", "link", "set", self.host_if, "up")
        for cmd in (["link", "set", "lo", "up"],
                    ["addr", "add", f"{self.peer_addr}/24", "dev", self.peer_if],
                    ["link", "set", self.peer_if, "up"],
                    ["route", "add", "default", "via", self.host_addr]):
            sh("ip", "-n", self.name, *cmd)
        for a in self.on_lo:
            sh("ip", "-n", self.name, "addr", "add", f"{a}/32", "dev", "lo")
        for cidr in self.routes:
            sh("ip", "route", "replace", cidr, "via", self.peer_addr)
        for cidr in self.uid_routes:
            sh("ip", "route", "replace", cidr, "via", self.peer_addr, "table", self.table)
        if self.uid_routes:
            sh("ip", "rule", "add", *self.uid_rule)
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.name, sys.executable, "-c", self.server],
                                     stdout=subprocess.PIPE, text=True)
        check(self.proc.stdout.readline().strip() == "ready", "the namespace's servers did not start")

    def down(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
        self.clean_stale()
