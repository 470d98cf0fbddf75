#!/usr/bin/env python3
"""Fails when a statement holds both `co_await` and a conditional operator (?:), or when a
co_await is the right operand of && or || (evaluated only conditionally, like a ?: branch).

g++ 12 miscompiles a co_await inside a conditional expression (`x ? co_await a() : co_await
b()` destroys the result twice: the "free(): double free" that took berthd down when a client
gave up on a long exec), and temporaries with non-trivial destructors built in a co_await
expression are destroyed twice too (docs/architecture.md, "Known g++ 12 pitfalls"). The fix
is always the same: named locals, one co_await per statement, no ?: around or inside it.

The heuristic, kept simple on purpose:
  - comments, string and character literals (raw strings included) are blanked out first, so a
    '?' left over can only be the conditional operator;
  - for each `co_await`, its statement is found by walking out from it to the nearest ';' or
    block brace at its own nesting level (parentheses it sits in are walked through, so
    `x = c ? (co_await a()) : b;` is one statement);
  - brace groups in that statement that hold a ';' are lambda bodies, statements of their own,
    and are left out (`co_await Blocking([&] { return a ? b : c; })` passes); brace groups
    without one are braced initialisers and stay (`co_await SendError({code, c ? x : y})`
    fails);
  - a '?' left in the statement fails it, and so does `&& co_await` or `|| !co_await` (the
    awaitable operators, `co_await (a() && b())`, combine awaitables, not co_awaits, and pass).
That is stricter than the bug (a ?: choosing between two enum values in an argument is
harmless), and it can miss a statement that begins with a lambda; the tree has no statement it
flags, and a named local is always the fix.

Usage: co_await_check.py SOURCE_ROOT   (checks the C++ sources under the listed directories)
"""
import pathlib
import re
import sys

DIRS = ["common", "guest-agent", "controller", "mcp", "cli", "tests", "bench"]
SUFFIXES = {".cc", ".h", ".cpp", ".hpp"}


def blank(text):
    """Replaces comments and literals by spaces, keeping newlines (for line numbers)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and nxt == '"' and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            # A string or character literal (an apostrophe after a digit is a digit separator).
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


OPEN = "([{"
CLOSE = ")]}"


def statement_extent(text, pos):
    """The [start, end) of the statement around the co_await at `pos` (see the heuristic)."""
    depth = 0
    start = pos
    while start > 0:
        c = text[start - 1]
        if c in CLOSE:
            if c == "}" and depth <= 0:
                break
            depth += 1
        elif c in OPEN:
            if c == "{" and depth <= 0:
                break
            depth -= 1
        elif c == ";" and depth <= 0:
            break
        start -= 1
    depth = 0
    end = pos
    while end < len(text):
        c = text[end]
        if c in OPEN:
            if c == "{" and depth < 0:
                break
            depth += 1
        elif c in CLOSE:
            depth -= 1
            if c == "}" and depth < 0:
                break
        elif c == ";" and depth <= 0:
            break
        end += 1
    return start, end


def without_blocks(stmt):
    """`stmt` without the brace groups that hold a ';' (lambda bodies)."""
    while True:
        stack = []
        cut = None
        for i, c in enumerate(stmt):
            if c == "{":
                stack.append(i)
            elif c == "}" and stack:
                open_at = stack.pop()
                if ";" in stmt[open_at:i]:
                    cut = (open_at, i + 1)
                    break
        if cut is None:
            return stmt
        stmt = stmt[:cut[0]] + " " + stmt[cut[1]:]


def check(path):
    return check_text(path.read_text(encoding="utf-8", errors="replace"))


def check_text(source):
    text = blank(source)
    problems = []
    seen = set()
    for m in re.finditer(r"\bco_await\b", text):
        start, end = statement_extent(text, m.start())
        if (start, end) in seen:
            continue
        seen.add((start, end))
        stmt = without_blocks(text[start:end])
        if "?" in stmt or re.search(r"(&&|\|\|)[\s(!]*co_await\b", stmt):
            line = text.count("\n", 0, m.start()) + 1
            problems.append((line, " ".join(stmt.split())))
    return problems


# The checker's own cases, run before the tree: what must fail and what must pass.
SELF_TEST_BAD = [
    "auto wrote = fixed ? co_await ex.WriteRaw(data) : co_await ex.WriteChunk(data);",
    "Status begun = fixed ? co_await ex.BeginFixed(s, t, n, h)\n : co_await ex.BeginChunked(s, t, h);",
    "co_await ex.SendError(!a ? a.error() : b.error());",
    "co_await ex.SendError({ErrorCode::kInternal, x ? \"a\" : \"b\"});",
    "x = c ? (co_await a()) : b;",
    "if (ok ? co_await a() : false) { return; }",
    "if (!out.empty() && !co_await ex.WriteChunk(out)) co_return;",
    "bool done = failed || (co_await Finish());",
]
SELF_TEST_GOOD = [
    "auto r = co_await Blocking([&] { return a ? b : c; });",
    "co_await ex.SendError(error); // why? a comment",
    "co_await ex.SendError({ErrorCode::kNotFound, \"no lease (expired?)\"});",
    "auto code = made ? status::created : status::ok;\nco_await ex.SendJson(code, body);",
    "if (!co_await ex.EndChunked()) co_return;\nint x = a ? 1 : 2;",
    "for (;;) { auto item = co_await reader.Next(); if (item) x = y ? 1 : 2; }",
    "char q = '?'; co_await f(q);",
    "co_await (Pump(a, b) && Pump(b, a));",
    "if (!co_await a() && ready) co_return;",
]


def self_test():
    ok = True
    for sample in SELF_TEST_BAD:
        if not check_text(sample):
            print(f"self-test: not flagged: {sample!r}")
            ok = False
    for sample in SELF_TEST_GOOD:
        if check_text(sample):
            print(f"self-test: flagged: {sample!r}")
            ok = False
    return ok


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    if not self_test():
        return 1
    failures = 0
    checked = 0
    for d in DIRS:
        for path in sorted((root / d).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            checked += 1
            for line, stmt in check(path):
                failures += 1
                print(f"{path.relative_to(root)}:{line}: co_await under ?:, && or || "
                      f"(g++ 12 pitfall, use named locals): {stmt[:160]}")
    if checked == 0:
        print(f"no sources found under {root}", file=sys.stderr)
        return 2
    print(f"{checked} files checked, {failures} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
