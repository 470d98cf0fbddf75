#!/usr/bin/env python3
"""Prints the JSON domain spec of a check VM for `berthd domain-xml` (images/lib/vm.sh).

  domain_spec.py IMAGE_DIR VM_DIR NAME UUID ACCEL PORT UID GID VCPUS MEMORY_MIB APPEND SCREEN

VCPUS, MEMORY_MIB and APPEND may be empty (image.json's values, no extra kernel arguments).
The keys are berthd's DomainSpec fields (controller/hypervisor/domain_spec_json.h).
"""
import json
import sys

image, vm_dir, name, uuid, accel, port, uid, gid, vcpus, mem, append, screen = sys.argv[1:]
meta = json.load(open(image + "/image.json"))
cmdline = meta["kernel"]["cmdline"] + (" " + append if append else "")
print(json.dumps({
    "name": name, "uuid": uuid, "accel": "kvm" if accel == "kvm" else "tcg",
    "vcpus": int(vcpus or meta.get("vcpus", 1)), "memory_mib": int(mem or meta["memory_mib"]),
    "kernel": image + "/vmlinuz", "initrd": image + "/initrd.img", "cmdline": cmdline,
    "root_disk": vm_dir + "/root.qcow2", "data_disk": vm_dir + "/data.qcow2",
    "token_file": vm_dir + "/token", "hostname": name, "screen": screen,
    "serial_log": vm_dir + "/serial.log", "vnc_socket": vm_dir + "/vnc/vnc.sock",
    "forward_port": int(port), "run_as_uid": int(uid), "run_as_gid": int(gid)}))
