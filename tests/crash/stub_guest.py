"""A guest image for the crash suite whose VMs are real QEMU domains that cost nothing once
started: the "kernel" is a 4 KiB multiboot image that disables interrupts and halts (QEMU's
multiboot loader jumps to it; a halted vCPU uses no host CPU under TCG), so define, start,
ACPI power-off (ignored: berthd pulls the plug after its grace), destroy, managedsave (a
~2 MB save file) and resume are libvirt's and QEMU's own, while no Debian boots. The agent runs
on the host (berthd's unix transport), so "the agent answers" needs no guest either.

Published as images/build publishes an image (<images>/<name>/<version>/{disk.qcow2,
vmlinuz, initrd.img, image.json}, `current` a link to the version), so berthd's image store,
holds and overlays are the real ones."""

import json
import os
import struct
import subprocess

NAME = "stub"
VERSION = "v1"

MULTIBOOT_MAGIC = 0x1BADB002
MULTIBOOT_AOUT_KLUDGE = 0x00010000  # the header gives the load addresses (no ELF)
LOAD_ADDR = 0x100000
# cli; hlt; jmp back to the hlt (an NMI would only land on it again)
CODE = bytes([0xFA, 0xF4, 0xEB, 0xFD])


def kernel_bytes():
    header = struct.pack("<IIIIIIII", MULTIBOOT_MAGIC, MULTIBOOT_AOUT_KLUDGE,
                         (-(MULTIBOOT_MAGIC + MULTIBOOT_AOUT_KLUDGE)) & 0xFFFFFFFF,
                         LOAD_ADDR,        # header_addr: the header is the file's first bytes
                         LOAD_ADDR,        # load_addr
                         0,                # load_end_addr: the whole file
                         0,                # bss_end_addr: none
                         LOAD_ADDR + 32)   # entry: right after the 32-byte header
    image = header + CODE
    return image + b"\0" * (4096 - len(image))


def publish(images_dir):
    """Writes the stub image under images_dir; returns its name."""
    version_dir = os.path.join(images_dir, NAME, VERSION)
    os.makedirs(version_dir, exist_ok=True)
    for d in (images_dir, os.path.join(images_dir, NAME), version_dir):
        os.chmod(d, 0o755)  # QEMU (libvirt-qemu) reads the kernel and the backing disk
    with open(os.path.join(version_dir, "vmlinuz"), "wb") as f:
        f.write(kernel_bytes())
    with open(os.path.join(version_dir, "initrd.img"), "wb") as f:
        f.write(b"\0" * 512)  # a multiboot module nobody reads
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2",
                    os.path.join(version_dir, "disk.qcow2"), "64M"], check=True)
    with open(os.path.join(version_dir, "image.json"), "w") as f:
        json.dump({"name": NAME, "version": VERSION, "stub": True,
                   "kernel": {"file": "vmlinuz", "initrd": "initrd.img"}}, f)
    for path in ("vmlinuz", "initrd.img", "disk.qcow2", "image.json"):
        os.chmod(os.path.join(version_dir, path), 0o644)
    current = os.path.join(images_dir, NAME, "current")
    if not os.path.islink(current):
        os.symlink(VERSION, current)
    return NAME
