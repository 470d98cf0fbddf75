#!/usr/bin/env python3
"""Fails when a Catch2 test skips silently: a WARN(...) followed, within three lines, by a bare
`return;`. Catch2 v2 has no skip, so such a case passes and ctest reports it green although
it never ran. Skips go through BERTH_SKIP (tests/support/skip.h), which scripts/test names in
its summary and checks against tests/expected_skips.txt.

Usage: skip_check.py SOURCE_ROOT   (checks tests/**/*.cc and *.h)
"""
import pathlib
import re
import sys

WARN = re.compile(r"\bWARN\s*\(")
RETURN = re.compile(r"^\s*return\s*;")


def main(argv):
    root = pathlib.Path(argv[1]) / "tests"
    bad = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".cc", ".h") or "node_modules" in path.parts:
            continue
        lines = path.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if WARN.search(line) and any(RETURN.match(l) for l in lines[i + 1:i + 4]):
                bad.append(f"{path.relative_to(root.parent)}:{i + 1}: WARN then return: "
                           "skip with BERTH_SKIP(reason) (tests/support/skip.h)")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
