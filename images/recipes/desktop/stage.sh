# Runs in the chroot (bash -eu) before the desktop packages are installed. Part of the
# desktop rootfs stage cache key. Nothing needed yet.
true
