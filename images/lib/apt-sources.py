#!/usr/bin/python3
"""Reads the host's apt sources and prints what the image build needs from them.

  apt-sources.py mirror SUITE     the URI of the Debian archive that serves SUITE (for debootstrap)
  apt-sources.py deb822 SUITE     a deb822 sources file for the guest: every host entry whose suite
                                  is SUITE, SUITE-updates or SUITE-security (component main)

Entries of other suites and third-party repositories are ignored, as are files apt itself
ignores (*.disabled...). Falls back to deb.debian.org when the host names no such entry.
"""
import glob
import os
import sys

ROOT = os.environ.get("BERTH_APT_ROOT", "/")


def entries():
    """Yields (uri, suite, components) from sources.list and sources.list.d."""
    base = os.path.join(ROOT, "etc/apt")
    files = [os.path.join(base, "sources.list")]
    files += sorted(glob.glob(os.path.join(base, "sources.list.d", "*.list")))
    files += sorted(glob.glob(os.path.join(base, "sources.list.d", "*.sources")))
    for path in files:
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        if path.endswith(".sources"):
            for stanza in text.split("\n\n"):
                fields = {}
                key = None
                for line in stanza.splitlines():
                    if line.startswith("#") or not line.strip():
                        continue
                    if line[0] in " \t" and key:
                        fields[key] += " " + line.strip()
                        continue
                    if ":" in line:
                        key, _, value = line.partition(":")
                        key = key.strip().lower()
                        fields[key] = value.strip()
                if fields.get("enabled", "yes").lower() == "no":
                    continue
                if "deb" not in fields.get("types", "").split():
                    continue
                for uri in fields.get("uris", "").split():
                    for suite in fields.get("suites", "").split():
                        yield uri.rstrip("/"), suite, fields.get("components", "").split()
        else:
            for line in text.splitlines():
                words = line.split("#", 1)[0].split()
                if len(words) < 3 or words[0] != "deb":
                    continue
                words = words[1:]
                if words[0].startswith("["):  # options like [arch=amd64 signed-by=...]
                    while words and not words[0].endswith("]"):
                        words = words[1:]
                    words = words[1:]
                if len(words) >= 2:
                    yield words[0].rstrip("/"), words[1], words[2:]


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("mirror", "deb822"):
        sys.exit(__doc__)
    mode, suite = sys.argv[1], sys.argv[2]
    found = [(u, s, c) for u, s, c in entries()
             if s in (suite, suite + "-updates", suite + "-security") and "main" in c
             and u.startswith(("http://", "https://", "file:/"))]
    if mode == "mirror":
        for uri, s, _ in found:
            if s == suite:
                print(uri)
                return
        print("http://deb.debian.org/debian")
        return
    if not any(s == suite for _, s, _ in found):
        found.insert(0, ("http://deb.debian.org/debian", suite, ["main"]))
    if not any(s == suite + "-security" for _, s, _ in found):
        found.append(("http://deb.debian.org/debian-security", suite + "-security", ["main"]))
    seen = set()
    out = []
    for uri, s, _ in found:
        if (uri, s) in seen:
            continue
        seen.add((uri, s))
        out.append("Types: deb\nURIs: %s\nSuites: %s\nComponents: main\n"
                   "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n" % (uri, s))
    print("\n".join(out), end="")


if __name__ == "__main__":
    main()
