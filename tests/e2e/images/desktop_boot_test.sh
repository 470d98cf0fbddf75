#!/usr/bin/env bash
# e2e: the desktop image builds (a no-op when up to date), boots under libvirt and
#  - its agent answers, `uname -r` equals kernel.version in image.json
#  - Chromium's DevTools endpoint answers on guest 127.0.0.1:9222 (asked through the agent)
#  - Chromium's profile is on the durable /workspace disk
#  - the VM's screen (virsh screenshot) is not blank (not a single colour) and has the size
#    asked for through fw_cfg opt/berth/screen ($BERTH_SCREEN, default 1280x720 here)
# Needs root. Agent: $BERTH_AGENT_BIN (default build/guest-agent/berth-agent). The screenshot
# is kept as $BERTH_E2E_OUT/desktop.png (default: build/e2e/images/desktop.png).
# Prints one PASS or FAIL line; exit 0 on PASS, 1 on FAIL, 77 when it cannot run (not root).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
source "$repo/images/lib/common.sh"
source "$repo/images/lib/vm.sh"
T=e2e_image_desktop
agent=${BERTH_AGENT_BIN:-$repo/build/guest-agent/berth-agent}
outdir=${BERTH_E2E_OUT:-$repo/build/e2e/images}
start=$(berth_now)

fail() { echo "FAIL $T (accel ${VM_ACCEL:-?}, transport forward: QEMU user net, berthd's domain XML): $*"; [ -n "$VM_DIR" ] && { echo "---- serial log tail ----"; berth_vm_serial_tail 40; }; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP $T: needs root"; exit 77; }
[ -x "$agent" ] || fail "agent binary $agent missing (build it first, or set BERTH_AGENT_BIN)"

echo "== build (no-op when up to date)"
"$repo/images/build" desktop --agent "$agent" || fail "images/build desktop failed"
image=$("$repo/images/build" --print-path desktop --agent "$agent") || fail "no image after the build"
kernel=$(berth_image_json_get "$image" kernel.version)

export BERTH_SCREEN=${BERTH_SCREEN:-1280x720}
trap 'berth_vm_cleanup' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
berth_vm_create "$image" desktop-e2e || fail "could not define the domain"
echo "== boot $VM_NAME (accel $VM_ACCEL, transport forward: QEMU user net, berthd's domain XML)"
berth_vm_boot || fail "the agent did not answer after boot"

got=$(berth_vm_exec 'uname -r') || fail "exec uname -r failed"
[ "$got" = "$kernel" ] || fail "guest kernel '$got', image.json says '$kernel'"

echo "== DevTools on guest 127.0.0.1:9222"
t0=$(berth_now)
version=
for _ in $(seq 1 "${BERTH_DEVTOOLS_DEADLINE:-300}"); do
  version=$(berth_vm_exec 'curl -s -m 5 http://127.0.0.1:9222/json/version' 2>/dev/null) &&
    [[ $version == *webSocketDebuggerUrl* ]] && break
  version=
  sleep 1
done
if [ -z "$version" ]; then
  berth_vm_exec 'systemctl status berth-desktop --no-pager -n 40' root 2>&1 | tail -40
  fail "DevTools did not answer on guest 127.0.0.1:9222"
fi
devtools_s=$(berth_elapsed "$t0")
browser=$(printf '%s' "$version" | "$BERTH_PYTHON" -c 'import json, sys; print(json.load(sys.stdin).get("Browser", "?"))')
berth_vm_exec 'test -d /workspace/.config/chromium/Default' >/dev/null ||
  fail "Chromium's profile is not in /workspace/.config/chromium"

echo "== screenshot"
mkdir -p "$outdir"
# Chromium answers DevTools before it has painted its window: wait for a non-blank screen.
stats=$(berth_vm_screenshot_wait "$outdir/desktop.png" "${BERTH_SCREENSHOT_DEADLINE:-180}") ||
  fail "the screen stayed blank: $outdir/desktop.png $stats"
size=$(printf '%s' "$stats" | "$BERTH_PYTHON" -c 'import json, sys; d = json.load(sys.stdin); print("%dx%d" % (d["width"], d["height"]))')
[ "$size" = "$BERTH_SCREEN" ] || fail "the screen is $size, fw_cfg asked for $BERTH_SCREEN"

echo "PASS $T: agent ready in ${VM_READY_SECONDS}s (accel $VM_ACCEL, transport forward: QEMU user net, berthd's domain XML), DevTools ($browser) ${devtools_s}s later; screenshot $outdir/desktop.png $stats; total $(berth_elapsed "$start")s"
