#!/usr/bin/env python3
"""End to end: guest network isolation with real VMs (issue 11, "Tests").

berthd runs with network isolation on; its filtering resolver's upstream is a DNS server this
test runs in a network namespace of its own, joined to the host by a veth pair, which also owns
a private address (10.254.9.2), the metadata address 169.254.169.254 and the addresses of
allowed.test (198.18.0.10) and denied.test (198.18.0.20), so no test packet leaves the machine
(except the Debian mirror check, as the other e2e test does). The host routes 198.18.0.0/24
(the benchmarking range, which nothing here uses; checked first) there, and the metadata
address only for the workspaces' uids (an `ip rule`), so the host's own traffic to the
metadata service, the Debian archive and the npm registry never goes into the namespace. A
run that was killed leaves them behind: the next one removes them first.

  - from inside guest A, as root, with raw sockets (AF_PACKET, hand-made SYNs, not connect()):
    127.0.0.1:<berthd port>, [::1]:<port>, the host's own address and guest B's agent port get no
    connection on the host (listeners there record every accept) and the guest sees no SYN-ACK
  - closed ranges: 10.254.9.2 and 169.254.169.254 are not reached; with 10.254.9.0/24 opened in
    berthd's config (after a restart) 10.254.9.2 is, and 169.254.169.254 still is not
  - allowlist by name: curl http://allowed.test/ works, denied.test does not resolve, the raw
    address of denied.test is refused; PATCH to none cuts an open connection; open restores the
    internet (the Debian mirror answers)
  - GET …/network shows the refusals; berthd restarted: no duplicate rules, none left for a
    deleted workspace
  - a workspace from before per-workspace uids (its net_uid cleared while it runs) reads as not
    isolated after the restart, and gets a uid of its own, under which its passt runs and its
    rules apply, on its next boot
  - a berthd that cannot install its table (run without CAP_NET_ADMIN) says so in its log and
    /v1/health, and a workspace it creates goes to error with the reason, with no VM started

Needs root, libvirt, nftables and the base image (images/build base). Exit 0 PASS, 1 FAIL, 77 SKIP.
Coordinate before running it: it boots two TCG guests (minutes of CPU on 2 cores).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from berthd_harness import (AGENT, BERTHD, IMAGES_DATA, REPO, TEST_DISK_FLOOR, Api, Berthd, Failure,  # noqa: E402
                            accel, check, log)
from netns_peer import PeerNamespace, sh  # noqa: E402

T = "e2e_network_isolation"
HOST_ADDR, PEER_ADDR = "10.254.9.1", "10.254.9.2"
PEER_ON_LO = ["169.254.169.254", "198.18.0.10", "198.18.0.20", "198.18.0.53"]
FAKE_INTERNET = "198.18.0.0/24"
METADATA = "169.254.169.254/32"
PROBE_PORT = 18099  # host listeners that record every accept

# Runs in the peer namespace: echo/HTTP servers on :80 and :8080 of every address, and a DNS
# server for allowed.test / denied.test (A records, TTL 300), NXDOMAIN otherwise.
PEER_SERVERS = r'''
import socket, struct, threading, http.server, socketserver
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from the peer\n"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    allow_reuse_address = True; daemon_threads = True
threading.Thread(target=S(("0.0.0.0", 80), H).serve_forever, daemon=True).start()
def echo():
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", 8080)); l.listen(64)
    while True:
        c, _ = l.accept()
        def serve(c=c):
            while True:
                d = c.recv(65536)
                if not d: break
                c.sendall(d)
            c.close()
        threading.Thread(target=serve, daemon=True).start()
threading.Thread(target=echo, daemon=True).start()
ANSWERS = {"allowed.test": "198.18.0.10", "denied.test": "198.18.0.20"}
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("198.18.0.53", 53))
print("ready", flush=True)
while True:
    q, src = u.recvfrom(4096)
    if len(q) < 17: continue
    i, labels = 12, []
    while i < len(q) and q[i]:
        labels.append(q[i+1:i+1+q[i]].decode(errors="replace")); i += 1 + q[i]
    name, qtype = ".".join(labels).lower(), struct.unpack("!H", q[i+1:i+3])[0]
    question = q[12:i+5]
    addr = ANSWERS.get(name)
    if addr and qtype == 1:
        hdr = q[:2] + b"\x85\x80" + b"\x00\x01\x00\x01\x00\x00\x00\x00"
        rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 300, 4) + socket.inet_aton(addr)
        u.sendto(hdr + question + rr, src)
    else:
        rcode = 0 if addr else 3
        u.sendto(q[:2] + bytes([0x85, 0x80 | rcode]) + b"\x00\x01\x00\x00\x00\x00\x00\x00" + question, src)
'''

# Runs in the guest as root: hand-made TCP SYNs on AF_PACKET, straight to the gateway's MAC, so
# nothing of the guest's own stack decides where they go; prints SYNACK <addr> for any answer.
RAW_SYN = r'''
import socket, struct, sys, time, random, subprocess
targets = [(a, int(p)) for a, p in (t.rsplit(":", 1) for t in sys.argv[1:])]
dev = subprocess.run(["ip", "-o", "route", "show", "default"], capture_output=True, text=True).stdout.split()
ifname, gw = dev[dev.index("dev") + 1], dev[dev.index("via") + 1]
subprocess.run(["ping", "-c1", "-W1", gw], capture_output=True)
neigh = subprocess.run(["ip", "neigh", "show", gw], capture_output=True, text=True).stdout.split()
gw_mac = bytes.fromhex(neigh[neigh.index("lladdr") + 1].replace(":", ""))
my_mac = bytes.fromhex(open(f"/sys/class/net/{ifname}/address").read().strip().replace(":", ""))
my_ip = subprocess.run(["ip", "-4", "-o", "addr", "show", ifname], capture_output=True, text=True).stdout.split()[3].split("/")[0]
my_ip6 = subprocess.run(["ip", "-6", "-o", "addr", "show", ifname, "scope", "global"], capture_output=True, text=True).stdout.split()
my_ip6 = my_ip6[3].split("/")[0] if len(my_ip6) > 3 else "fe80::1"
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack(f"!{len(b)//2}H", b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return (~s) & 0xffff
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); s.bind((ifname, 0))
sent = {}
for addr, port in targets:
    sport = random.randint(20000, 60000); sent[sport] = addr
    tcp = struct.pack("!HHIIBBHHH", sport, port, random.getrandbits(32), 0, 5 << 4, 0x02, 64240, 0, 0)
    if ":" in addr:
        src, dst = socket.inet_pton(socket.AF_INET6, my_ip6), socket.inet_pton(socket.AF_INET6, addr)
        pseudo = src + dst + struct.pack("!I3xB", len(tcp), 6)
        tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
        ip = struct.pack("!IHBB", 6 << 28, len(tcp), 6, 64) + src + dst
        s.send(gw_mac + my_mac + b"\x86\xdd" + ip + tcp)
    else:
        src, dst = socket.inet_aton(my_ip), socket.inet_aton(addr)
        pseudo = src + dst + struct.pack("!BBH", 0, 6, len(tcp))
        tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0, src, dst)
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        s.send(gw_mac + my_mac + b"\x08\x00" + ip + tcp)
s.settimeout(0.5); end = time.time() + 4
while time.time() < end:
    try: f = s.recv(2048)
    except socket.timeout: continue
    et = f[12:14]
    if et == b"\x08\x00" and f[23] == 6: t = f[14 + (f[14] & 15) * 4:]
    elif et == b"\x86\xdd" and f[20] == 6: t = f[54:]
    else: continue
    dport, flags = struct.unpack("!H", t[2:4])[0], t[13]
    if dport in sent and flags & 0x12 == 0x12: print("SYNACK", sent[dport], flush=True)
print("done", flush=True)
'''


class Lab:
    """The peer namespace, its servers and the routes to it, and the host's recording listeners."""

    def __init__(self):
        self.accepts = []
        self.listeners = []
        self.peer = PeerNamespace("bte2e", os.getpid(), HOST_ADDR, PEER_ADDR, PEER_ON_LO,
                                  routes=[FAKE_INTERNET], uid_routes=[METADATA],
                                  server=PEER_SERVERS)

    def up(self):
        self.peer.up()
        for family, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind((addr, PROBE_PORT))
            s.listen(16)
            self.listeners.append(s)
            threading.Thread(target=self._record, args=(s,), daemon=True).start()

    def _record(self, s):
        while True:
            try:
                c, peer = s.accept()
            except OSError:
                return
            self.accepts.append(peer)
            c.close()

    def down(self):
        for s in self.listeners:
            s.close()
        self.peer.down()


def refused_without_rules(images_data):
    """A berthd without CAP_NET_ADMIN: nftables refuses its table, so it boots no guest."""
    data = tempfile.mkdtemp(prefix="berthd-nonet-e2e-", dir="/var/lib")
    os.chmod(data, 0o711)
    config = os.path.join(data, "config.json")
    with open(config, "w") as f:
        json.dump({"listen": "127.0.0.1:0", "data_dir": data, "images_dir": os.path.join(images_data, "images"),
                   "accel": accel(), "min_free_disk": TEST_DISK_FLOOR, "network": {"isolation": True}}, f)
    berthd = Berthd(data, config, prefix=["setpriv", "--bounding-set", "-net_admin", "--inh-caps", "-net_admin"])
    ws_id = None
    try:
        url = berthd.start()
        health = json.load(urllib.request.urlopen(url + "/v1/health", timeout=10))
        check(health.get("network") == "failed", f"health does not say isolation failed: {health}")
        log_text = open(os.path.join(data, "berthd.log"), errors="replace").read()
        check("cannot install the nftables table" in log_text and "no guest will boot" in log_text,
              f"berthd did not say why no guest boots: {log_text[-2000:]}")
        api = Api(url, open(os.path.join(data, "admin.key")).read().strip())
        ws = api.ok("POST", "/v1/workspaces", {"name": "nonet"})
        ws_id = ws["id"]
        ws, _ = api.wait("nonet", "error", timeout_s=120)
        check("guest network isolation is not in place" in (ws.get("error") or ""),
              f"the error does not give the reason: {ws}")
        state = subprocess.run(["virsh", "-q", "domstate", f"berth-{ws_id}"], capture_output=True, text=True)
        check("running" not in state.stdout, f"a VM started without isolation: {state.stdout}")
        log("no isolation, no guest: health 'failed', the workspace in error with the reason, no VM")
    finally:
        berthd.stop()
        if ws_id:
            subprocess.run(["virsh", "-q", "destroy", f"berth-{ws_id}"], capture_output=True)
            subprocess.run(["virsh", "-q", "undefine", f"berth-{ws_id}", "--nvram"], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


def passt_uids(ws_id):
    out = sh("ps", "-eo", "uid=,args=").stdout.splitlines()
    return {int(line.split(None, 1)[0]) for line in out if "passt" in line.split(None, 1)[1] and ws_id in line}


def host_address():
    out = sh("ip", "-4", "-o", "route", "get", "1.1.1.1").stdout.split()
    return out[out.index("src") + 1]


def main():
    if os.geteuid() != 0:
        print(f"SKIP {T}: needs root")
        return 77
    for tool in ("nft", "ip"):
        if not shutil.which(tool):
            print(f"FAIL {T}: {tool} is missing (scripts/setup installs it)")
            return 1
    log("libvirt and the base image (a no-op when up to date)")
    subprocess.run([f"{REPO}/images/lib/ensure-libvirt"], check=True)
    subprocess.run([f"{REPO}/images/build", "base", "--data", IMAGES_DATA, "--agent", AGENT], check=True)
    log("a berthd that cannot install its rules")
    refused_without_rules(IMAGES_DATA)
    lab = Lab()
    data = tempfile.mkdtemp(prefix="berthd-net-e2e-", dir="/var/lib")
    ids = []
    os.chmod(data, 0o711)
    config_path = os.path.join(data, "config.json")

    def write_config(open_cidrs):
        with open(config_path, "w") as f:
            json.dump({"listen": "127.0.0.1:0", "data_dir": data,
                       "images_dir": os.path.join(IMAGES_DATA, "images"), "accel": accel(),
                       "min_free_disk": TEST_DISK_FLOOR,
                       "network": {"isolation": True, "upstream_dns": ["198.18.0.53"],
                                   "open_cidrs": open_cidrs}}, f)

    write_config([])
    berthd = Berthd(data, config_path)
    try:
        lab.up()
        url = berthd.start()
        log(f"berthd at {url}: {berthd.ran()}")
        api = Api(url, open(os.path.join(data, "admin.key")).read().strip())
        berthd_port = int(url.rsplit(":", 1)[1])
        log("two workspaces: A (allowlist allowed.test), B (open)")
        a = api.ok("POST", "/v1/workspaces", {"name": "neta", "network": {"egress": "allowlist", "allow": ["allowed.test"]}})
        ids.append(a["id"])
        b = api.ok("POST", "/v1/workspaces", {"name": "netb"})
        ids.append(b["id"])
        api.wait("neta", "running")
        b, _ = api.wait("netb", "running")
        b_port = int(sh("sqlite3", os.path.join(data, "berth.db"),
                        f"SELECT agent_port FROM workspaces WHERE id = '{b['id']}'").stdout.strip() or 0)
        check(b_port > 0, "guest B has no forwarded agent port")
        api.exec("neta", f"cat > /tmp/rawsyn.py <<'EOF'\n{RAW_SYN}\nEOF", user="root")

        log("raw SYNs from guest A to the host's loopback, its own address and B's agent port")
        targets = [f"127.0.0.1:{berthd_port}", f"127.0.0.1:{PROBE_PORT}", f"::1:{PROBE_PORT}",
                   f"{host_address()}:{PROBE_PORT}", f"{HOST_ADDR}:{PROBE_PORT}", f"127.0.0.1:{b_port}"]
        r = api.exec("neta", "python3 /tmp/rawsyn.py " + " ".join(targets), user="root", timeout_s=60)
        check("done" in r["stdout"], f"the raw-SYN probe did not run: {r}")
        check("SYNACK" not in r["stdout"], f"the guest got an answer from the host: {r['stdout']}")
        check(not lab.accepts, f"the host accepted connections from the guest: {lab.accepts}")

        log("closed ranges: a private address and the metadata address, by connect() and raw SYN")
        for addr in (PEER_ADDR, "169.254.169.254"):
            r = api.exec("netb", f"curl -s -m 5 -o /dev/null -w '%{{http_code}}' http://{addr}/ || echo refused")
            check("200" not in r["stdout"], f"guest B reached {addr}: {r}")
            r = api.exec("netb", f"cat > /tmp/rawsyn.py <<'EOF'\n{RAW_SYN}\nEOF\npython3 /tmp/rawsyn.py {addr}:8080", user="root", timeout_s=60)
            check("SYNACK" not in r["stdout"], f"guest B got a SYN-ACK from {addr}")

        log("allowlist by name")
        r = api.exec("neta", "curl -s -m 10 http://allowed.test/")
        check("hello from the peer" in r["stdout"], f"allowed.test did not answer: {r}")
        r = api.exec("neta", "getent hosts denied.test || echo unresolved")
        check("unresolved" in r["stdout"], f"denied.test resolved: {r}")
        r = api.exec("neta", "curl -s -m 5 http://198.18.0.20/ || echo refused")
        check("hello" not in r["stdout"], f"denied.test's raw address answered: {r}")
        net = api.ok("GET", "/v1/workspaces/neta/network")
        check(net["isolated"] and net["counters"]["refused_names"] >= 1, f"no refusals counted: {net}")
        check(any(d["address"] == "198.18.0.20" for d in net["refused"]), f"198.18.0.20 not listed: {net}")

        log("PATCH to none cuts an open connection")
        api.exec("neta", "nohup python3 -c \"import socket,time\ns=socket.create_connection(('198.18.0.10',8080))\n"
                         "open('/tmp/conn','w').write('open')\nwhile True:\n  time.sleep(1)\n  s.sendall(b'x')\n"
                         "  s.recv(1)\" >/tmp/conn.log 2>&1 & sleep 0", timeout_s=30)
        api.exec("neta", "for i in $(seq 50); do test -f /tmp/conn && break; sleep 0.2; done; cat /tmp/conn")
        api.ok("PATCH", "/v1/workspaces/neta/network", {"egress": "none"})
        r = api.exec("neta", "for i in $(seq 50); do grep -q Error /tmp/conn.log && break; sleep 0.2; done; cat /tmp/conn.log")
        check("Error" in r["stdout"], f"the connection survived the change to none: {r}")
        api.ok("PATCH", "/v1/workspaces/neta/network", {"egress": "open"})
        # By address: the names the test's own upstream DNS knows are allowed.test and
        # denied.test only, so the mirror's address comes from the host's resolver.
        mirror = socket.getaddrinfo("deb.debian.org", 80, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
        r = api.exec("neta", f"curl -s -m 30 --resolve deb.debian.org:80:{mirror} -o /dev/null "
                             "-w 'mirror %{http_code}\\n' http://deb.debian.org/debian/dists/bookworm/Release")
        check("mirror 200" in r["stdout"], f"open did not restore the internet: {r}")

        log("restart with 10.254.9.0/24 opened, B made a workspace from before per-workspace uids")
        db = os.path.join(data, "berth.db")
        old_uid = int(sh("sqlite3", db, f"SELECT net_uid FROM workspaces WHERE id = '{b['id']}'").stdout.strip())
        check(passt_uids(b["id"]) == {old_uid}, f"B's passt does not run under its uid {old_uid}")
        berthd.stop()
        sh("sqlite3", db, f"UPDATE workspaces SET net_uid = NULL WHERE id = '{b['id']}'")
        write_config(["10.254.9.0/24"])
        url = berthd.start()
        api = Api(url, open(os.path.join(data, "admin.key")).read().strip())
        net = api.ok("GET", "/v1/workspaces/netb/network")
        check(net["isolated"] is False, f"a guest running without a uid reads as isolated: {net}")
        check(f"w{old_uid}" not in sh("nft", "list", "table", "inet", "berth").stdout,
              "rules kept for a uid no workspace has")
        api.ok("POST", "/v1/workspaces/netb/stop")
        api.wait("netb", "stopped")
        api.ok("POST", "/v1/workspaces/netb/start")
        api.wait("netb", "running")
        new_uid = sh("sqlite3", db, f"SELECT net_uid FROM workspaces WHERE id = '{b['id']}'").stdout.strip()
        check(new_uid.isdigit() and int(new_uid) >= 2000000, f"B got no uid on its next boot: {new_uid!r}")
        check(passt_uids(b["id"]) == {int(new_uid)}, f"B's passt does not run under its new uid {new_uid}")
        net = api.ok("GET", "/v1/workspaces/netb/network")
        check(net["isolated"] is True, f"B is not isolated after its boot: {net}")
        log(f"B: uid {old_uid} cleared, reported not isolated, uid {new_uid} after its next boot")
        r = api.exec("netb", f"curl -s -m 5 http://{PEER_ADDR}/")
        check("hello from the peer" in r["stdout"], f"the opened CIDR is not reachable: {r}")
        r = api.exec("netb", "curl -s -m 5 http://169.254.169.254/ || echo refused")
        check("hello" not in r["stdout"], f"metadata reachable after opening a private CIDR: {r}")
        table = sh("nft", "list", "table", "inet", "berth").stdout
        check(table.count("meta skuid vmap @ws_filter") == 1, "duplicate rules after the restart")
        b_uid = int(sh("sqlite3", os.path.join(data, "berth.db"),
                       f"SELECT net_uid FROM workspaces WHERE id = '{b['id']}'").stdout.strip())
        api.ok("DELETE", "/v1/workspaces/netb")
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and api.call("GET", "/v1/workspaces/netb")[0] != 404:
            time.sleep(1)
        check(f"w{b_uid}" not in sh("nft", "list", "table", "inet", "berth").stdout, "rules left for a deleted workspace")
        api.ok("DELETE", "/v1/workspaces/neta")
        print(f"PASS {T} ({berthd.ran()})")
        return 0
    except Failure as e:
        print(f"FAIL {T} ({berthd.ran()}): {e}")
        return 1
    finally:
        # berthd leaves VMs running when it stops: a failed run must not leave two TCG guests
        # eating the CPU of every test after it.
        berthd.stop()
        for i in ids:
            subprocess.run(["virsh", "-q", "destroy", f"berth-{i}"], capture_output=True)
            subprocess.run(["virsh", "-q", "undefine", f"berth-{i}", "--managed-save", "--nvram"],
                           capture_output=True)
        lab.down()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
