#!/usr/bin/env python3
"""Runs every example of README.md, so the manual cannot drift from the program.

    test_readme.py PIPESIM [--commands-only | --python-only]

Commands: every line inside a fenced code block that starts with `pipesim ` or `$ pipesim ` (a trailing `\\`
continues it on the next line) runs through bash, in README order, in one temporary directory: `pipesim` is the
binary under test (first on PATH), and the repository's data folders (tests, docs, models, hw_profiles,
fill_jobs, traces) are linked in, so a command reads repository files by relative path and writes its outputs
beside them (a later command may read what an earlier one wrote). Each must exit 0, or the code its trailing
`# exit N` comment names, with exactly one line on stderr. A command written `$ pipesim ...` must print exactly
the lines shown under it, up to the next `$ ` line or the end of its block. Lines with synopsis placeholders
(`[`, `|`, `…`, `...`) are not commands: they are listed as skipped.

Python: every ```python block runs as a script (in order, in the same directory) with an interpreter that can
`import pipesim` (this one, or /usr/bin/python3), with PYTHONPATH from the environment and matplotlib on the Agg
backend; where none can, the blocks are skipped and the test says so (with --python-only, it fails).

README.md is found through PIPESIM_SOURCE_DIR (the repository root) or relative to this script.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

PIPESIM = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else "pipesim"
MODE = sys.argv.pop(1) if len(sys.argv) > 1 else ""
if MODE not in ("", "--commands-only", "--python-only"):
    sys.exit(f"test_readme.py: unknown mode {MODE!r}; valid: --commands-only, --python-only")
SRC = os.path.abspath(os.environ.get("PIPESIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")))
README = os.path.join(SRC, "README.md")
LINKED = ["tests", "docs", "models", "hw_profiles", "fill_jobs", "traces"]
TIMEOUT_S = 600  # per command or Python block; the sanitizer build is several times slower than Release
PLACEHOLDERS = ("[", "|", "…", "...")
EXIT_COMMENT = re.compile(r"#\s*exit\s+(\d+)\s*$")


class Example:
    def __init__(self, line_no, kind, text, expected_output=None, expected_code=0):
        self.line_no, self.kind, self.text = line_no, kind, text
        self.expected_output, self.expected_code = expected_output, expected_code


def fenced_blocks(lines):
    """(language, first line number, lines) of every fenced code block."""
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^\s*```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        lang, start, body = m.group(1), i + 2, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        blocks.append((lang, start, body))
        i += 1
    return blocks


def strip_comment(command):
    """The command without a trailing `# ...` comment (a `#` outside quotes that starts a word)."""
    quote = None
    for j, ch in enumerate(command):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (j == 0 or command[j - 1].isspace()):
            return command[:j].rstrip()
    return command.rstrip()


def parse(text):
    lines = text.split("\n")
    examples, skipped = [], []
    for lang, start, body in fenced_blocks(lines):
        if lang == "python":
            examples.append(Example(start, "python", "\n".join(body)))
            continue
        if lang not in ("", "sh", "bash", "console", "shell"):
            continue
        j = 0
        while j < len(body):
            raw = body[j].lstrip()
            line_no = start + j
            shown = raw.startswith("$ pipesim ")
            if not (shown or raw.startswith("pipesim ")):
                j += 1
                continue
            command = raw[2:] if shown else raw
            while command.rstrip().endswith("\\") and j + 1 < len(body):
                j += 1
                command = command.rstrip()[:-1].rstrip() + " " + body[j].strip()
            j += 1
            m = EXIT_COMMENT.search(command)
            code = int(m.group(1)) if m else 0
            bare = strip_comment(command)
            if any(p in bare for p in PLACEHOLDERS):
                skipped.append((line_no, bare))
                continue
            expected = None
            if shown:
                expected = []
                while j < len(body) and not body[j].lstrip().startswith("$ "):
                    expected.append(body[j])
                    j += 1
            examples.append(Example(line_no, "command", bare, expected, code))
    return examples, skipped


def python_interpreter(env):
    """An interpreter that can import the module, or None and why not."""
    last = "no Python interpreter found"
    for candidate in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        if not candidate or not os.path.exists(candidate):
            continue
        p = subprocess.run([candidate, "-c", "import pipesim, pipesim.plot, pipesim.sweeps"], env=env,
                           capture_output=True, text=True, timeout=120)
        if p.returncode == 0:
            return candidate, ""
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
    return None, last


def normalize(text):
    return [line.rstrip() for line in text.rstrip("\n").split("\n")] if text.strip() else []


def main():
    if not os.path.isfile(PIPESIM) or not os.access(PIPESIM, os.X_OK):
        sys.exit(f"test_readme.py: {PIPESIM}: not an executable (usage: test_readme.py PIPESIM)")
    with open(README, encoding="utf-8") as f:
        examples, skipped = parse(f.read())
    commands = [e for e in examples if e.kind == "command"]
    pythons = [e for e in examples if e.kind == "python"]
    if MODE != "--python-only" and not commands:
        sys.exit(f"test_readme.py: no `pipesim` commands found in {README}")
    for line_no, text in skipped:
        print(f"skipped (synopsis) README.md:{line_no}: {text}")

    failures = []
    with tempfile.TemporaryDirectory(prefix="pipesim-readme-") as work:
        bindir = os.path.join(work, ".bin")
        os.mkdir(bindir)
        os.symlink(PIPESIM, os.path.join(bindir, "pipesim"))
        for name in LINKED:
            if os.path.exists(os.path.join(SRC, name)):
                os.symlink(os.path.join(SRC, name), os.path.join(work, name))
        env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), MPLBACKEND="Agg")

        if MODE != "--python-only":
            for e in commands:
                t0 = time.monotonic()
                try:
                    p = subprocess.run(["bash", "-o", "pipefail", "-c", e.text], cwd=work, env=env,
                                       capture_output=True, text=True, timeout=TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    failures.append(f"README.md:{e.line_no}: {e.text}\n  timed out after {TIMEOUT_S} s")
                    continue
                took = time.monotonic() - t0
                where = f"README.md:{e.line_no}: {e.text}"
                problems = []
                if p.returncode != e.expected_code:
                    problems.append(f"exit code {p.returncode}, expected {e.expected_code}; stderr: "
                                    f"{p.stderr.strip()[-2000:]}")
                elif e.expected_code != 0 and len(p.stderr.strip().splitlines()) != 1:
                    problems.append(f"expected one line on stderr, got: {p.stderr.strip()!r}")
                if e.expected_output is not None and p.returncode == e.expected_code:
                    want, got = normalize("\n".join(e.expected_output)), normalize(p.stdout)
                    if want != got:
                        diff = [f"  line {k + 1}:\n    README: {w!r}\n    now:    {g!r}"
                                for k, (w, g) in enumerate(zip(want + [""] * len(got), got + [""] * len(want)))
                                if w != g][:5]
                        problems.append("output differs from the README (scripts/refresh_readme.py rewrites "
                                        "it):\n" + "\n".join(diff))
                status = "FAIL" if problems else "ok"
                print(f"{status:4} {took:6.2f} s  README.md:{e.line_no}: {e.text}", flush=True)
                if problems:
                    failures.append(where + "\n  " + "\n  ".join(problems))

        if MODE != "--commands-only" and pythons:
            py_env = dict(env)
            interpreter, why = python_interpreter(py_env)
            if interpreter is None and MODE == "--python-only":
                failures.append(f"`import pipesim` fails ({why}): --python-only needs PYTHONPATH to the built module")
                pythons = []
            elif interpreter is None:
                print(f"skipped {len(pythons)} Python example(s): `import pipesim` fails ({why}); set PYTHONPATH "
                      f"to the built module (build/python) to run them")
                pythons = []
            else:
                for e in pythons:
                    script = os.path.join(work, f"readme_example_{e.line_no}.py")
                    with open(script, "w", encoding="utf-8") as f:
                        f.write(e.text + "\n")
                    t0 = time.monotonic()
                    try:
                        p = subprocess.run([interpreter, script], cwd=work, env=py_env, capture_output=True,
                                           text=True, timeout=TIMEOUT_S)
                        rc, err = p.returncode, p.stderr
                    except subprocess.TimeoutExpired:
                        rc, err = None, f"timed out after {TIMEOUT_S} s"
                    took = time.monotonic() - t0
                    status = "ok" if rc == 0 else "FAIL"
                    print(f"{status:4} {took:6.2f} s  README.md:{e.line_no}: python block", flush=True)
                    if rc != 0:
                        failures.append(f"README.md:{e.line_no}: python block\n  {err.strip()[-3000:]}")

    if failures:
        print(f"\n{len(failures)} README example(s) failed:\n" + "\n\n".join(failures))
        return 1
    ran = [f"{len(commands)} commands"] if MODE != "--python-only" else []
    ran += [f"{len(pythons)} Python blocks"] if MODE != "--commands-only" else []
    print(f"\nall README examples ran ({', '.join(ran)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
