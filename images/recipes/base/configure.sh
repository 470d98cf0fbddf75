# Final configuration of the base image. Runs in the chroot (bash -euo pipefail) on every image
# build, after files/ has been copied in and the agent installed. No network, no /proc.

# The user agents work as: uid 1000, passwordless sudo, no password login.
if ! id agent >/dev/null 2>&1; then
  useradd --create-home --uid 1000 --user-group --shell /bin/bash --comment "Berth agent" agent
fi
usermod -p '!' agent
usermod -a -G sudo,adm agent
chmod 0440 /etc/sudoers.d/berth-agent
# No root password either (locked; root is reached through the agent or sudo).
usermod -p '*' root
# A few defaults that make a fresh shell pleasant.
cat >>/home/agent/.bashrc <<'RC'

# Berth: /workspace is the durable data disk; $HOME lives on the workspace's root disk.
export LANG=C.UTF-8
export PATH="$HOME/.local/bin:$PATH"
RC
chown agent:agent /home/agent/.bashrc

echo 'LANG=C.UTF-8' >/etc/default/locale
echo berth >/etc/hostname
cat >/etc/hosts <<'HOSTS'
127.0.0.1	localhost
127.0.1.1	berth
::1		localhost ip6-localhost ip6-loopback
ff02::1		ip6-allnodes
ff02::2		ip6-allrouters
HOSTS
ln -sf /usr/share/zoneinfo/Etc/UTC /etc/localtime
echo Etc/UTC >/etc/timezone

# Each VM derives its own machine-id (from the libvirt UUID) when this is empty.
: >/etc/machine-id
ln -sf /etc/machine-id /var/lib/dbus/machine-id
rm -f /var/lib/systemd/random-seed /var/lib/systemd/credential.secret

# Services.
systemctl enable systemd-networkd.service systemd-timesyncd.service \
  berth-init.service berth-agent.service berth-resolv.path berth-growfs.service
systemctl set-default multi-user.target
# Not needed in a Berth VM, and they cost boot time or background I/O.
systemctl mask apt-daily.timer apt-daily-upgrade.timer apt-daily.service apt-daily-upgrade.service \
  e2scrub_all.timer e2scrub_all.service e2scrub_reap.service fstrim.timer fstrim.service \
  dpkg-db-backup.timer man-db.timer systemd-networkd-wait-online.service \
  systemd-pstore.service remote-fs.target cryptsetup.target \
  systemd-binfmt.service proc-sys-fs-binfmt_misc.automount proc-sys-fs-binfmt_misc.mount \
  sys-kernel-debug.mount sys-kernel-tracing.mount \
  systemd-update-utmp.service systemd-update-utmp-runlevel.service \
  modprobe@dm_mod.service modprobe@loop.service >/dev/null

# The host boots the image's kernel from outside the disk: a kernel upgraded inside the guest
# would not be booted, and its removal would take the booted kernel's modules away.
apt-mark hold linux-image-amd64 "$(ls /lib/modules | head -1 | sed 's/^/linux-image-/')" >/dev/null

# Leave nothing from the build behind.
# (The package lists stay: see stage.sh.)
rm -rf /tmp/* /var/tmp/* /var/cache/apt/*.bin
find /var/log -type f -exec truncate -s 0 {} +
