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

# The initrd: Debian's MODULES=most (virtio_blk, virtio_pci, virtio_net, ext4, vsock are
# modules and must be in it for direct kernel boot); no resume device to wait for.
mkdir -p /etc/initramfs-tools/conf.d
echo 'RESUME=none' >/etc/initramfs-tools/conf.d/resume
echo 'MODULES=most' >/etc/initramfs-tools/conf.d/berth-modules
# The kernel's postinst must not look for a boot loader.
mkdir -p /etc/kernel
echo 'do_symlinks = no' >/etc/kernel-img.conf
