#!/bin/bash
# Runs inside the image's chroot during the cached root file system stage of images/build.
# Usage (in the chroot): chroot-apt.sh PACKAGE_LIST_FILE [HOOK_SCRIPT]
# HOOK_SCRIPT (the recipe's stage.sh) runs first, then the packages are installed with
# --no-install-recommends. Part of the stage cache key: editing it rebuilds the stage.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 LANG=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin

list=$1
hook=${2:-}

# No service starts inside the chroot; dpkg need not fsync every file (the image is written
# later by mkfs.ext4 -d; a crash here just fails the build).
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
chmod 0755 /usr/sbin/policy-rc.d
echo force-unsafe-io >/etc/dpkg/dpkg.cfg.d/zz-berth-unsafe-io

if [ -n "$hook" ]; then bash -euo pipefail "$hook"; fi

mapfile -t pkgs < <(sed -e 's/#.*//' -e 's/[[:space:]]\+/\n/g' "$list" | sed '/^$/d')
apt-get update -q
if [ ${#pkgs[@]} -gt 0 ]; then
  apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confold "${pkgs[@]}"
fi
apt-get clean
# The package lists stay (see the base recipe's stage.sh); the binary caches are rebuilt on use.
rm -rf /var/cache/apt/*.bin
rm -f /etc/dpkg/dpkg.cfg.d/zz-berth-unsafe-io /usr/sbin/policy-rc.d
