# Shell functions shared by images/build, images/boot-check and the e2e tests.
# Source it; it defines functions and a few variables and changes no shell options.

BERTH_IMAGES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BERTH_REPO_DIR=$(cd "$BERTH_IMAGES_DIR/.." && pwd)
BERTH_PYTHON=/usr/bin/python3
[ -x "$BERTH_PYTHON" ] || BERTH_PYTHON=python3

# The data directory: --data beats $BERTH_DATA beats /var/lib/berth.
berth_data_dir() { printf '%s\n' "${BERTH_DATA:-/var/lib/berth}"; }

# Monotonic-enough seconds with a fraction.
berth_now() { date +%s.%N; }
# berth_elapsed START -> "12.3"
berth_elapsed() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }

berth_log() { printf '%s\n' "$*" >&2; }
berth_die() { printf '%s: error: %s\n' "${BERTH_PROG:-berth}" "$*" >&2; exit 1; }

# Step bookkeeping: `berth_step NAME` announces a step; the previous one is closed with its
# time. BERTH_STEP holds the current step name so an EXIT trap can say what failed.
BERTH_STEP=
BERTH_STEP_START=
berth_step() {
  berth_step_done
  BERTH_STEP=$1
  BERTH_STEP_START=$(berth_now)
  printf '==> %s\n' "$BERTH_STEP" >&2
}
berth_step_done() {
  if [ -n "$BERTH_STEP" ]; then
    printf '    %s: %ss\n' "$BERTH_STEP" "$(berth_elapsed "$BERTH_STEP_START")" >&2
  fi
  BERTH_STEP=
}

# sha256 of stdin, hex.
berth_sha256() { sha256sum | cut -d' ' -f1; }

# berth_hash_files FILE|DIR...: one digest over the relative paths, modes and contents of
# the given files (directories recursively), stable across machines and checkouts.
berth_hash_files() {
  local p
  for p in "$@"; do
    if [ -d "$p" ]; then
      (cd "$p" && find . -mindepth 1 \( -type f -o -type l -o -type d \) | LC_ALL=C sort | while read -r f; do
        if [ -d "$f" ] && [ ! -L "$f" ]; then
          printf '%s dir\n' "$f"
        elif [ -L "$f" ]; then
          printf '%s link %s\n' "$f" "$(readlink "$f")"
        else
          printf '%s %s %s\n' "$f" "$([ -x "$f" ] && echo x || echo -)" "$(sha256sum <"$f" | cut -d' ' -f1)"
        fi
      done) | sed "s|^|$(basename "$p")/|"
    elif [ -e "$p" ]; then
      printf '%s %s %s\n' "$(basename "$p")" "$([ -x "$p" ] && echo x || echo -)" "$(sha256sum <"$p" | cut -d' ' -f1)"
    else
      printf '%s missing\n' "$(basename "$p")"
    fi
  done | berth_sha256
}

# The package list of a recipe file without comments and blank lines, one per line.
berth_read_packages() { sed -e 's/#.*//' -e 's/[[:space:]]\+/\n/g' "$1" | sed '/^$/d'; }

# Does KVM really work here? /dev/kvm can exist yet be unusable (nested, no permissions, or
# so slow that TCG is faster). Boots a 512-byte boot sector that writes "K" to the serial port
# under KVM (as the libvirt-qemu user) and under TCG, and compares.
# Caches the answer in /run/berth/kvm for the life of the machine. Prints kvm or qemu.
berth_accel() {
  if [ -n "${BERTH_ACCEL:-}" ]; then printf '%s\n' "$BERTH_ACCEL"; return; fi
  local cache=/run/berth/kvm
  if [ -s "$cache" ]; then cat "$cache"; return; fi
  local answer=qemu tmp run=()
  mkdir -p /run/berth 2>/dev/null || true
  "$BERTH_IMAGES_DIR/lib/ensure-libvirt" >/dev/null 2>&1 || true   # also fixes /dev/kvm access
  # Probe as the user QEMU runs as under libvirt, when there is one.
  if id libvirt-qemu >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then run=(runuser -u libvirt-qemu --); fi
  if [ -c /dev/kvm ] && "${run[@]}" test -r /dev/kvm -a -w /dev/kvm; then
    tmp=$(mktemp -d)
    chmod 0777 "$tmp"
    "$BERTH_PYTHON" - "$tmp/boot.img" <<'PY'
import sys
code = bytes([0xBA, 0xF8, 0x03, 0xB0, 0x4B, 0xEE,  # mov dx,0x3f8; mov al,'K'; out dx,al
              0xB0, 0x01, 0xE6, 0xF4,              # mov al,1; out 0xf4,al: isa-debug-exit
              0xF4, 0xEB, 0xFD])                   # hlt; jmp $
open(sys.argv[1], "wb").write(code + bytes(510 - len(code)) + b"\x55\xaa")
PY
    chmod 0666 "$tmp/boot.img"   # QEMU opens an IDE disk read-write
    # Exits with status 3 ((1 << 1) | 1) through isa-debug-exit once the guest ran. Timed under
    # KVM and TCG: a nested /dev/kvm that works but is pathologically slow (seen: 4 s of system
    # time for this, and a Linux guest stuck in its real-mode setup for minutes) is no use. On a
    # host whose KVM works both take about as long as QEMU takes to start (0.1 s); the slow
    # nested one measured 1.4-1.5 s against TCG's 0.1 s, and its Linux guests never booted, so
    # KVM may take at most the larger of 5x TCG's time and TCG's plus 0.5 s.
    local accel t0 secs kvm_secs=0 tcg_secs=0 ok
    for accel in tcg kvm; do
      rm -f "$tmp/out"
      t0=$(berth_now)
      "${run[@]}" timeout 20 qemu-system-x86_64 -accel "$accel" -display none -nodefaults -no-reboot \
        -device isa-debug-exit,iobase=0xf4,iosize=0x04 -m 16 -serial "file:$tmp/out" \
        -drive "file=$tmp/boot.img,format=raw,if=ide" >/dev/null 2>&1 && true
      ok=$?
      secs=$(berth_elapsed "$t0")
      [ $ok -eq 3 ] && grep -q K "$tmp/out" 2>/dev/null || secs=fail
      if [ "$accel" = kvm ]; then kvm_secs=$secs; else tcg_secs=$secs; fi
    done
    if [ "$kvm_secs" != fail ] && awk -v k="$kvm_secs" -v t="$tcg_secs" \
        'BEGIN { lim = (t == "fail" ? 1.5 : (t * 5 > t + 0.5 ? t * 5 : t + 0.5)); exit !(k <= lim) }'; then
      answer=kvm
    fi
    echo "kvm probe: kvm ${kvm_secs}s, tcg ${tcg_secs}s -> $answer" >/run/berth/kvm.probe 2>/dev/null || true
    rm -rf "$tmp"
    if [ "$answer" = kvm ] && command -v virsh >/dev/null &&
       ! virsh -c qemu:///system domcapabilities --virttype kvm >/dev/null 2>&1; then
      answer=qemu
    fi
  fi
  mkdir -p /run/berth 2>/dev/null && printf '%s\n' "$answer" >"$cache" 2>/dev/null
  printf '%s\n' "$answer"
}
