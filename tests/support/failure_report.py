#!/usr/bin/env python3
"""Why each failed test failed, in a few lines, read from ctest's JUnit files.

scripts/test prints this last, so that a CI log cut to its head and tail still shows the
failing assertion (Catch2's "FAILED:" with its expansion), a sanitizer's report, or an
end-to-end script's "FAIL" line, instead of only the test's name. Never fails the run itself:
any problem reading the files is reported and the exit status is 0.

Usage: failure_report.py JUNIT.xml...
"""
import re
import sys
import xml.etree.ElementTree as ET

# Lines that say why, and how many lines after each one belong to it.
MARKERS = [
    (re.compile(r": FAILED:$"), 8),                     # Catch2 assertion
    (re.compile(r"^FAIL "), 2),                         # tests/e2e/*, tests/browser/*
    (re.compile(r"ERROR: (Address|Leak|Thread|Memory)Sanitizer"), 12),
    (re.compile(r"runtime error:"), 3),                 # UBSan
    (re.compile(r"^SUMMARY: "), 0),
    (re.compile(r"^Traceback \(most recent call last\)"), 12),
    (re.compile(r"^(AssertionError|assert\.|  ✖|not ok )"), 6),
    (re.compile(r"(due to unexpected exception|due to a fatal error condition)"), 4),
]
MAX_LINES_PER_TEST = 80


def report(path):
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.get("status") not in ("fail", "failed") and case.find("failure") is None:
            continue
        text = case.findtext("system-out") or ""
        lines = text.splitlines()
        picked = []
        keep_until = -1
        for i, line in enumerate(lines):
            for pattern, after in MARKERS:
                if pattern.search(line):
                    start = max(i - 2, keep_until + 1)
                    picked.extend(lines[start:i])
                    keep_until = max(keep_until, i + after)
                    break
            if i <= keep_until:
                picked.append(line)
        if not picked:
            picked = ["(no assertion or report found in its output; its last lines:)"] + lines[-15:]
        if len(picked) > MAX_LINES_PER_TEST:
            picked = picked[:MAX_LINES_PER_TEST] + [f"... ({len(picked) - MAX_LINES_PER_TEST} more lines)"]
        out.append(f"--- {case.get('name')} ({path.rsplit('/', 1)[-1]})")
        out.extend("  " + line[:400] for line in picked)
    return out


def main(paths):
    lines = []
    for path in paths:
        try:
            lines.extend(report(path))
        except (OSError, ET.ParseError) as e:
            lines.append(f"--- cannot read {path}: {e}")
    if lines:
        print("\n== why the failed tests failed")
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
