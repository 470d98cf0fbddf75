# Runs in the chroot (bash -eu) before the base packages are installed. Part of the rootfs
# stage cache key. Settings here must exist before the packages' maintainer scripts run.

# Leave out documentation, man pages and translations (copyright files stay).
cat >/etc/dpkg/dpkg.cfg.d/berth-nodoc <<'CFG'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
path-exclude=/usr/share/lintian/*
CFG

# The package lists ship in the image, so `sudo apt-get install -y X` works in a new workspace
# without an `apt-get update` first. apt keeps them compressed (Acquire::GzipIndexes) with its
# cheapest compressor, lz4 by default (19 MB for bookworm's main); lz4 made costlier, it picks
# zstd (9 MB; reading them stays well under a second). No translations.
cat >/etc/apt/apt.conf.d/berth-lists <<'CFG'
Acquire::GzipIndexes "true";
Acquire::Languages "none";
APT::Compressor::lz4::Cost "1000";
CFG
# debootstrap's lists are uncompressed (50 MB): apt-get update fetches them again, compressed.
rm -rf /var/lib/apt/lists/*

# The initrd: direct kernel boot needs the modules that mount the root disk in it (in
# Debian's kernel virtio_pci, virtio_blk and ext4 are modules). MODULES=most (Debian's
# default) carries them but makes a 30 MB initrd that takes TCG seconds to unpack and probe;
# a list of what a QEMU/KVM guest's boot needs makes it a few MB. Everything else loads
# from the root file system later.
mkdir -p /etc/initramfs-tools/conf.d
echo 'RESUME=none' >/etc/initramfs-tools/conf.d/resume
echo 'MODULES=list' >/etc/initramfs-tools/conf.d/berth-modules
cat >/etc/initramfs-tools/modules <<'MODS'
# Berth: the root disk is virtio-blk (or virtio-scsi / NVMe on other hypervisors), ext4.
virtio_pci
virtio_blk
virtio_scsi
sd_mod
nvme
virtio_net
virtio_console
virtio_rng
ext4
crc32c_generic
MODS
# The kernel's postinst must not look for a boot loader.
mkdir -p /etc/kernel
echo 'do_symlinks = no' >/etc/kernel-img.conf
