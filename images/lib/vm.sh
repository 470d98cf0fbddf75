# Shell functions to boot a Berth image under libvirt for checks and e2e tests.
# Source after lib/common.sh. State lives in VM_* variables; one VM per shell.
#
#   berth_vm_create IMAGE_DIR [TAG]  overlay + blank data disk + token + domain definition
#   berth_vm_boot                    start, wait for the agent (retry once on a boot hang)
#   berth_vm_exec CMD [USER]         run CMD (a shell string) through the agent's /v1/exec;
#                                    prints its stdout, returns its exit code
#   berth_vm_screenshot OUT.png      the VM's screen as PNG
#   berth_vm_screenshot_wait OUT [S] screenshots until the screen is not blank (deadline S)
#   berth_vm_destroy                 hard power-off (virsh destroy)
#   berth_vm_shutdown [SECONDS]      ACPI shutdown, destroy after the grace period
#   berth_vm_cleanup                 destroy + undefine + delete VM_DIR (unless VM_KEEP=1)
#   berth_vm_serial_tail [N]         last N lines of the serial console log
#
# The domain is the one berthd defines for a workspace (`berthd domain-xml`: the same devices,
# disk cache and seclabel), with QEMU's user network forwarding a loopback port to the agent
# where berthd would run passt.
#
# Settings (env): BERTH_ACCEL (kvm|qemu; default: detected), BERTH_BOOT_DEADLINE (seconds,
# default 90 with KVM, 300 with TCG), BERTH_DATA_DISK_SIZE (default 4G), BERTH_SCREEN
# (1280x800), BERTH_VCPUS / BERTH_MEMORY_MIB (default: image.json), BERTH_CMDLINE_APPEND
# (kernel args), BERTHD_BIN (default build/controller/berthd).

BERTH_VIRSH=(virsh -q -c qemu:///system)
VM_NAME= VM_DIR= VM_UUID= VM_PORT= VM_TOKEN= VM_ACCEL= VM_KEEP=${VM_KEEP:-0}
VM_READY_SECONDS= VM_UID= VM_GID=

berth_free_port() {
  "$BERTH_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# berth_image_json_get IMAGE_DIR KEY.PATH -> value from image.json (e.g. kernel.version)
berth_image_json_get() {
  "$BERTH_PYTHON" -c '
import json, sys
v = json.load(open(sys.argv[1] + "/image.json"))
for k in sys.argv[2].split("."):
    v = v[k]
print(v)' "$1" "$2"
}

berth_vm_create() {
  local image=$1 tag=${2:-$(basename "$(dirname "$image")")}
  [ -f "$image/image.json" ] || berth_die "no image at $image"
  "$BERTH_IMAGES_DIR/lib/ensure-libvirt"
  VM_ACCEL=$(berth_accel)
  VM_NAME=berth-check-$tag-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
  VM_UUID=$("$BERTH_PYTHON" -c 'import sys, uuid; print(uuid.uuid5(uuid.NAMESPACE_URL, "berth-check:" + sys.argv[1]))' "$VM_NAME")
  VM_DIR=$(mktemp -d "${TMPDIR:-/var/tmp}/$VM_NAME.XXXXXX")
  # QEMU creates the VNC socket itself, in a directory of its uid (below).
  mkdir -p "$VM_DIR/vnc"

  qemu-img create -q -f qcow2 -F qcow2 -b "$image/disk.qcow2" "$VM_DIR/root.qcow2"
  qemu-img create -q -f qcow2 "$VM_DIR/data.qcow2" "${BERTH_DATA_DISK_SIZE:-4G}"
  # The per-boot token: 256 random bits, hex, in a file only root and the VM's QEMU can read.
  # It never appears on a command line.
  (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$VM_DIR/token")
  VM_TOKEN=$(cat "$VM_DIR/token")
  VM_PORT=$(berth_free_port)

  # QEMU runs as a uid of its own, as berthd runs each workspace's (libvirt's DAC seclabel,
  # relabel='no'): the VM's files are given to it here, and the image stays root's and is never
  # chowned. 1999000-1999999 is below berthd's workspace uids (network_config.h), which its
  # nftables table filters.
  VM_UID=$((1999000 + RANDOM % 1000))
  VM_GID=$(getent group kvm | cut -d: -f3)
  VM_GID=${VM_GID:-$VM_UID}
  chown "$VM_UID:$VM_GID" "$VM_DIR" "$VM_DIR/vnc" "$VM_DIR/root.qcow2" "$VM_DIR/data.qcow2" "$VM_DIR/token"
  chmod 0700 "$VM_DIR" "$VM_DIR/vnc"
  chmod 0600 "$VM_DIR/root.qcow2" "$VM_DIR/data.qcow2" "$VM_DIR/token"

  # The domain XML is berthd's own (`berthd domain-xml`, controller/hypervisor/domain_xml.cc),
  # with QEMU's user network forwarding a loopback port to the agent instead of passt.
  local berthd=${BERTHD_BIN:-$BERTH_IMAGES_DIR/../build/controller/berthd}
  [ -x "$berthd" ] || berth_die "no berthd at $berthd (build it, or set BERTHD_BIN): it writes the domain XML"
  "$BERTH_PYTHON" "$BERTH_IMAGES_DIR/lib/domain_spec.py" "$image" "$VM_DIR" "$VM_NAME" "$VM_UUID" \
    "$VM_ACCEL" "$VM_PORT" "$VM_UID" "$VM_GID" "${BERTH_VCPUS:-}" "${BERTH_MEMORY_MIB:-}" \
    "${BERTH_CMDLINE_APPEND:-}" "${BERTH_SCREEN:-1280x800}" >"$VM_DIR/spec.json" ||
    berth_die "could not write the domain spec"
  "$berthd" domain-xml <"$VM_DIR/spec.json" >"$VM_DIR/domain.xml" ||
    berth_die "berthd domain-xml refused $VM_DIR/spec.json"
  "${BERTH_VIRSH[@]}" define "$VM_DIR/domain.xml" >/dev/null
}

berth_vm_state() { "${BERTH_VIRSH[@]}" domstate "$VM_NAME" 2>/dev/null | head -1; }

# True when GET /v1/health answers 200 through the port forward.
berth_vm_healthy() {
  [ "$(curl -s -o /dev/null -m 3 -w '%{http_code}' "http://127.0.0.1:$VM_PORT/v1/health" 2>/dev/null)" = 200 ]
}

# berth_vm_wait_ready SECONDS: waits for the agent; 0 when ready, 1 on timeout or if the VM stops.
berth_vm_wait_ready() {
  local deadline=$(( $(date +%s) + $1 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    berth_vm_healthy && return 0
    case $(berth_vm_state) in running|paused) ;; *) return 1 ;; esac
    sleep 0.5
  done
  return 1
}

berth_default_deadline() {
  if [ -n "${BERTH_BOOT_DEADLINE:-}" ]; then echo "$BERTH_BOOT_DEADLINE"
  elif [ "$VM_ACCEL" = kvm ]; then echo 90
  else echo 300; fi
}

# Starts the VM and waits for the agent; on a missed deadline destroys it and tries once more
# (the known rare TCG boot hang). Sets VM_READY_SECONDS.
berth_vm_boot() {
  local deadline try start
  deadline=$(berth_default_deadline)
  for try in 1 2; do
    start=$(berth_now)
    echo "    [$VM_NAME] start ($VM_ACCEL, try $try, deadline ${deadline}s)" >&2
    "${BERTH_VIRSH[@]}" start "$VM_NAME" >/dev/null || return 1
    if berth_vm_wait_ready "$deadline"; then
      VM_READY_SECONDS=$(berth_elapsed "$start")
      echo "    [$VM_NAME] agent ready after ${VM_READY_SECONDS}s" >&2
      return 0
    fi
    echo "    [$VM_NAME] agent not ready after $(berth_elapsed "$start")s (state: $(berth_vm_state)); serial log tail:" >&2
    berth_vm_serial_tail 30 >&2
    berth_vm_destroy
    printf '\n==== retry %s ====\n' "$try" >>"$VM_DIR/serial.log" 2>/dev/null || true
  done
  return 1
}

# berth_vm_exec_json CMD [USER]: the raw JSON answer of POST /v1/exec.
berth_vm_exec_json() {
  local body
  body=$("$BERTH_PYTHON" -c '
import json, sys
req = {"cmd": sys.argv[1]}
if len(sys.argv) > 2 and sys.argv[2]:
    req["user"] = sys.argv[2]
print(json.dumps(req))' "$1" "${2:-}")
  curl -s -m "${BERTH_EXEC_TIMEOUT:-120}" -H "Authorization: Bearer $VM_TOKEN" \
    -H 'Content-Type: application/json' --data-binary "$body" \
    "http://127.0.0.1:$VM_PORT/v1/exec"
}

berth_vm_exec() {
  local out
  out=$(berth_vm_exec_json "$@") || { echo "exec: no answer from the agent" >&2; return 255; }
  printf '%s' "$out" | "$BERTH_PYTHON" -c '
import json, sys
raw = sys.stdin.read()
try:
    r = json.loads(raw)
except ValueError:
    sys.stderr.write("exec: not JSON: %r\n" % raw[:300]); sys.exit(255)
if "exit_code" not in r:
    sys.stderr.write("exec: %s\n" % raw[:300]); sys.exit(255)
sys.stdout.write(r.get("stdout", "")); sys.stderr.write(r.get("stderr", ""))
sys.exit(r["exit_code"] if 0 <= r["exit_code"] < 256 else 255)'
}

berth_vm_screenshot() {
  local out=$1 raw=$VM_DIR/screenshot.raw
  "${BERTH_VIRSH[@]}" screenshot "$VM_NAME" "$raw" >/dev/null || return 1
  "$BERTH_PYTHON" "$BERTH_IMAGES_DIR/lib/png.py" topng "$raw" "$out"
  rm -f "$raw"
}

# berth_vm_screenshot_wait OUT.png [SECONDS]: takes screenshots until one is not blank (not
# nearly a single colour: a desktop still drawing) or the deadline passes; the last one stays in
# OUT.png. Returns 0 for a non-blank screen. Prints the picture's stats.
berth_vm_screenshot_wait() {
  local out=$1 deadline=$(( $(date +%s) + ${2:-180} )) stats
  while :; do
    if berth_vm_screenshot "$out"; then
      if stats=$("$BERTH_PYTHON" "$BERTH_IMAGES_DIR/lib/png.py" notblank "$out"); then
        printf '%s\n' "$stats"
        return 0
      fi
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      printf '%s\n' "${stats:-no screenshot}"
      return 1
    fi
    sleep 5
  done
}

berth_vm_destroy() {
  case $VM_NAME in berth-check-*) ;; *) return 0 ;; esac
  if [ "$(berth_vm_state)" != "shut off" ]; then
    "${BERTH_VIRSH[@]}" destroy "$VM_NAME" >/dev/null 2>&1 || true
  fi
}

berth_vm_shutdown() {
  local grace=${1:-60} i
  "${BERTH_VIRSH[@]}" shutdown "$VM_NAME" >/dev/null 2>&1 || true
  for ((i = 0; i < grace * 2; i++)); do
    [ "$(berth_vm_state)" = "shut off" ] && return 0
    sleep 0.5
  done
  berth_vm_destroy
}

berth_vm_serial_tail() {
  tail -n "${1:-40}" "$VM_DIR/serial.log" 2>/dev/null | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g' || true
}

berth_vm_cleanup() {
  [ -n "$VM_NAME" ] || return 0
  case $VM_NAME in berth-check-*) ;; *) return 0 ;; esac
  if [ "$VM_KEEP" = 1 ]; then
    echo "kept: domain $VM_NAME (port $VM_PORT), files in $VM_DIR" >&2
    echo "  remove with: virsh -c qemu:///system destroy $VM_NAME; virsh -c qemu:///system undefine $VM_NAME; rm -rf $VM_DIR" >&2
    return 0
  fi
  berth_vm_destroy
  "${BERTH_VIRSH[@]}" undefine "$VM_NAME" >/dev/null 2>&1 || true
  [ -n "$VM_DIR" ] && [ -d "$VM_DIR" ] && rm -rf "$VM_DIR"
  VM_NAME=
}
