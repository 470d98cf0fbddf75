# Final configuration of the desktop image, after base's configure.sh (chroot, no network).
for g in video render input audio; do getent group "$g" >/dev/null || groupadd -r "$g"; done
usermod -a -G video,render,input,audio agent
systemctl enable berth-desktop.service
# The X session is on tty7; no getty is needed on the other VTs either.
systemctl mask getty@tty1.service >/dev/null
