#!/usr/bin/env python3
"""Fails when a library source file grows past MAX_FILE_LINES or a function past MAX_FUNCTION_LINES, so that
the tree stays readable: split by concern before that. Functions are found by braces (comments and string
literals blanked first): a body opened after a `)` at namespace or class scope, lambdas counted in their
function. Usage: scripts/check-sizes.py (from anywhere)."""
import os
import re
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 100
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ["sim", "planner", "calibrate", "replay", "cli", "python/src"]
FILES_CAPPED = "sim/src"  # the file-length rule applies here
SCOPE_WORDS = re.compile(r"(template\s*<.*>\s*)?(namespace|class|struct|enum|union|extern)\b", re.S)


def blanked(src):
    """The source with comments and string/char literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i) + 2
        elif src.startswith('R"(', i):
            j = src.find(')"', i) + 2
        elif src[i] in "\"'":
            j = i + 1
            while j < n and src[j] != src[i]:
                j += 2 if src[j] == "\\" else 1
            j += 1
        else:
            out.append(src[i])
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", src[i:j]))
        i = j
    return "".join(out)


def functions(text):
    """(first line, lines, name) of every function body at namespace or class scope."""
    stack, last, found = [], 0, []
    for i, c in enumerate(text):
        if c == "{":
            head = text[last:i].strip()
            in_function = any(k == "function" for k, _, _ in stack)
            kind = "block"
            if not in_function:
                tail = head.split(")")[-1]
                looks_like_call = head.endswith((")", "const", "noexcept", "override", "final")) or "->" in tail
                if SCOPE_WORDS.match(head) or not looks_like_call:
                    kind = "scope"
                    if "(" in head and not re.search(r"\b(namespace|class|struct|enum|union)\b", head) \
                            and "=" not in head.split("(")[0]:
                        kind = "function"
                else:
                    kind = "function"
            stack.append((kind, i, head))
            last = i + 1
        elif c == "}":
            if stack:
                kind, start, head = stack.pop()
                if kind == "function" and not any(k == "function" for k, _, _ in stack):
                    first, end = text.count("\n", 0, start) + 1, text.count("\n", 0, i) + 1
                    found.append((first, end - first + 1, re.sub(r"\s+", " ", head.split("(")[0]).split(" ")[-1]))
            last = i + 1
        elif c == ";":
            last = i + 1
    return found


def main():
    problems = []
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, folder)):
            for name in sorted(names):
                if not name.endswith((".cpp", ".hpp", ".cu", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                with open(path, encoding="utf-8") as f:
                    src = f.read()
                lines = src.count("\n")
                if rel.startswith(FILES_CAPPED) and lines > MAX_FILE_LINES:
                    problems.append(f"{rel}: {lines} lines; valid: at most {MAX_FILE_LINES} (split it by concern)")
                for first, length, fn in functions(blanked(src)):
                    if length > MAX_FUNCTION_LINES:
                        problems.append(f"{rel}:{first}: {fn} is {length} lines; valid: at most {MAX_FUNCTION_LINES}")
    for p in problems:
        print(f"sizes: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"sizes: no file in {FILES_CAPPED} over {MAX_FILE_LINES} lines, no function over {MAX_FUNCTION_LINES}")


if __name__ == "__main__":
    main()
