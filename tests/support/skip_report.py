#!/usr/bin/env python3
"""Names every skipped test of a ctest run and fails on skips the allow-list does not expect.

Usage: skip_report.py SKIP_LOG JUNIT_XML [JUNIT_XML...] ALLOW_LIST

Skips come from two places:
  - SKIP_LOG: lines `SKIP <ctest name>: <test case>: <reason>` that BERTH_SKIP
    (tests/support/skip.h) appends for a Catch2 case that skipped the rest of itself;
  - each JUNIT_XML (ctest --output-junit, one per build scripts/test runs): tests that ctest
    itself reports skipped or disabled (exit 77 with SKIP_RETURN_CODE); the reason is the first
    `SKIP ` line of their output.
Prints a summary; exit 0 when every skip is expected here, 1 otherwise (or when the inputs
cannot be read). BERTH_ALLOW_SKIPS=1 reports unexpected skips without failing (for a developer
who knows; CI never sets it).
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

CONDITIONS = {
    "no-kvm": lambda: not os.path.exists("/dev/kvm"),
    "no-vhost-vsock": lambda: not os.path.exists("/dev/vhost-vsock"),
    "not-root": lambda: os.geteuid() != 0,
}


def read_allow_list(path):
    entries = []
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            condition, _, pattern = line.partition(" ")
            if condition not in CONDITIONS or not pattern.strip():
                raise ValueError(f"{path}:{number}: want `CONDITION REGEX`, CONDITION one of "
                                 f"{', '.join(CONDITIONS)}: {line}")
            entries.append((condition, re.compile(pattern.strip()), number))
    return entries


def read_skips(skip_log, junits):
    skips = []  # "<ctest name>: ..." without the leading "SKIP "
    if os.path.exists(skip_log):
        with open(skip_log, errors="replace") as f:
            skips += [line.rstrip("\n")[5:] for line in f if line.startswith("SKIP ")]
    cases = [case for junit in junits for case in ET.parse(junit).getroot().iter("testcase")]
    for case in cases:
        status = case.get("status", "run")
        if status == "run" or case.find("failure") is not None:
            continue  # run (passed or failed) or failed to run: ctest's own result covers it
        name = case.get("name", "?")
        out = case.findtext("system-out") or ""
        said = [line[5:] for line in out.splitlines() if line.startswith("SKIP ")]
        if said and said[0].startswith(name + ":"):
            skips.append(said[0])
        else:
            skipped = case.find("skipped")
            why = skipped.get("message", status) if skipped is not None else status
            skips.append(f"{name}: {why} (no SKIP line in its output)")
    return skips


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 1
    skip_log, junits, allow_path = argv[1], argv[2:-1], argv[-1]
    try:
        allowed = read_allow_list(allow_path)
        skips = read_skips(skip_log, junits)
    except (OSError, ValueError, ET.ParseError) as e:
        print(f"skip report: {e}", file=sys.stderr)
        return 1
    unexpected = 0
    print(f"Skipped: {len(skips)}" + ("" if skips else " (every test ran)"))
    for skip in skips:
        match = next(((c, n) for c, rx, n in allowed if rx.fullmatch(skip) and CONDITIONS[c]()),
                     None)
        if match:
            print(f"  expected ({match[0]}, {os.path.basename(allow_path)}:{match[1]}): {skip}")
        else:
            unexpected += 1
            print(f"  UNEXPECTED: {skip}")
    if unexpected:
        print(f"{unexpected} unexpected skip(s): a test that does not run must not pass for one "
              f"that did; make it run here, or add it to {allow_path} with the reason.")
        if os.environ.get("BERTH_ALLOW_SKIPS") == "1":
            print("BERTH_ALLOW_SKIPS=1: not failing the run for them.")
            return 0
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
