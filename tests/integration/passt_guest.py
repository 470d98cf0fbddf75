#!/usr/bin/env python3
"""A fake guest on a real passt's socket: QEMU's stream-netdev framing (a 4-byte big-endian
length, then an Ethernet frame), with frames made by hand as a hostile guest would, so nothing
but passt and the host decide where they go.

  passt_guest.py SOCKET GUEST_IP GATEWAY TARGET...
  TARGET: ADDR:PORT  a TCP SYN; prints "ADDR:PORT SYN-ACK|RST|no answer"
          dns:NAME   a DNS question (A) to 192.0.2.53; prints "dns:NAME RCODE FIRST_A"
"""
import random
import socket
import struct
import sys
import time

MAC = bytes.fromhex("525400aabbcc")
PASST_MAC = bytes.fromhex("9a559a559a55")


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return (~s) & 0xffff


def ipv4(src, dst, proto, payload):
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), random.getrandbits(16), 0, 64, proto, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    return PASST_MAC + MAC + b"\x08\x00" + ip[:10] + struct.pack("!H", csum(ip)) + ip[12:] + payload


def main():
    path, me, gw, targets = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)

    def send(frame):
        s.sendall(struct.pack("!I", len(frame)) + frame)

    arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, MAC, socket.inet_aton(me), b"\0" * 6, socket.inet_aton(gw))
    send(b"\xff" * 6 + MAC + b"\x08\x06" + arp)
    results = {}
    for target in targets:
        results[target] = "no answer"
        if target.startswith("dns:"):
            name = target[4:]
            q = struct.pack("!HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
            q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack("!HH", 1, 1)
            udp = struct.pack("!HHHH", 40053, 53, 8 + len(q), 0) + q
            pseudo = socket.inet_aton(me) + socket.inet_aton("192.0.2.53") + struct.pack("!BBH", 0, 17, len(udp))
            udp = udp[:6] + struct.pack("!H", csum(pseudo + udp)) + udp[8:]
            send(ipv4(me, "192.0.2.53", 17, udp))
            wanted = ("udp", 40053, target)
        else:
            addr, port = target.rsplit(":", 1)
            sport = random.randint(20000, 60000)
            tcp = struct.pack("!HHIIBBHHH", sport, int(port), random.getrandbits(32), 0, 5 << 4, 0x02, 64240, 0, 0)
            pseudo = socket.inet_aton(me) + socket.inet_aton(addr) + struct.pack("!BBH", 0, 6, len(tcp))
            tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
            send(ipv4(me, addr, 6, tcp))
            wanted = ("tcp", sport, target)
        s.settimeout(0.3)
        end = time.time() + 3
        buf = b""
        while time.time() < end and results[target] == "no answer":
            try:
                d = s.recv(65536)
            except socket.timeout:
                continue
            if not d:
                break
            buf += d
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack("!I", buf[:4])[0]:
                n = struct.unpack("!I", buf[:4])[0]
                f, buf = buf[4:4 + n], buf[4 + n:]
                if f[12:14] != b"\x08\x00":
                    continue
                l4 = f[14 + (f[14] & 15) * 4:]
                dport = struct.unpack("!H", l4[2:4])[0]
                if dport != wanted[1]:
                    continue
                if wanted[0] == "tcp" and f[23] == 6:
                    flags = l4[13]
                    results[target] = "SYN-ACK" if flags & 0x12 == 0x12 else ("RST" if flags & 4 else hex(flags))
                elif wanted[0] == "udp" and f[23] == 17:
                    dns = l4[8:]
                    rcode = dns[3] & 0xF
                    first = ""
                    if struct.unpack("!H", dns[6:8])[0] > 0:
                        # The answer follows the question; a compressed name is 2 bytes.
                        i = 12
                        while dns[i]:
                            i += 1 + dns[i]
                        i += 5
                        i += 2 if dns[i] & 0xC0 else 0
                        rtype, _, _, rdlen = struct.unpack("!HHIH", dns[i:i + 10])
                        if rtype == 1 and rdlen == 4:
                            first = socket.inet_ntoa(dns[i + 10:i + 14])
                    results[target] = f"{rcode} {first}".strip()
        print(target, results[target], flush=True)


if __name__ == "__main__":
    main()
