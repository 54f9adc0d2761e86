#!/usr/bin/env python3
"""Runs every command block of README.md and docs/**/*.md that is marked runnable, with the real
binary, and checks what the block shows.

    docs_test.py ZINF_BINARY REPO_ROOT

The marker is an HTML comment on the line before a fenced block (GitHub does not render it):

    <!-- runnable -->            every command exits 0
    <!-- runnable: exit 2 -->    every command exits 2

A ```console block holds commands (lines starting with "$ ") each followed by the output it shows;
a ```sh block holds commands only (one per line; "#" starts a comment), whose output is not checked.
Shown output is matched line by line against stdout and stderr together, trailing spaces ignored:
"…" inside a line matches any text on that line (timings, figures that vary), and a line that is
only "…" matches any number of lines (output left out). Output after the last shown line must be
left out with "…" too.

Every command runs in one scratch copy of the checkout (its tracked and unignored files, as a fresh
git repository) with `zinf` on PATH (and build/default/bin/zinf meaning the same binary), so what a
documented command writes never touches the checkout. After all of them `git status --porcelain`
of the copy must be empty: a documented command may write only where .gitignore says run outputs
go (runs/). The checkout's own status must be the same before and after.

Every relative link in those files must lead to a file of the checkout, and a link to a heading
(`file.md#anchor`, `#anchor`) to a heading there (GitHub's anchors).

Exit status: 0 when every block passed and every link resolves, 1 otherwise (each failure names the
file and line); 77 (skipped) outside a git checkout.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

MARKER = re.compile(r"^<!--\s*runnable(?::\s*exit\s+(\d+))?\s*-->\s*$")
FENCE = re.compile(r"^```(console|sh)\s*$")
COMMAND_TIMEOUT_S = 60


class Block:
    def __init__(self, path, line, kind, exit_code):
        self.path = path
        self.line = line  # 1-based line of the fence
        self.kind = kind
        self.exit_code = exit_code
        self.steps = []  # (line, command, expected lines or None)


def parse(path, root):
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        marker = MARKER.match(lines[i])
        if not marker:
            i += 1
            continue
        rel = path.relative_to(root)
        if i + 1 >= len(lines) or not FENCE.match(lines[i + 1]):
            raise SystemExit(f"{rel}:{i + 1}: a runnable marker must be followed by a ```console or ```sh block")
        kind = FENCE.match(lines[i + 1]).group(1)
        block = Block(rel, i + 2, kind, int(marker.group(1) or 0))
        j = i + 2
        while j < len(lines) and lines[j].rstrip() != "```":
            text = lines[j]
            if kind == "sh":
                if text.strip() and not text.lstrip().startswith("#"):
                    block.steps.append((j + 1, text, None))
            elif text.startswith("$ "):
                block.steps.append((j + 1, text[2:], []))
            elif block.steps:
                block.steps[-1][2].append(text)
            elif text.strip():
                raise SystemExit(f"{rel}:{j + 1}: output before the first '$ ' command")
            j += 1
        if j >= len(lines):
            raise SystemExit(f"{rel}:{block.line}: unterminated block")
        if not block.steps:
            raise SystemExit(f"{rel}:{block.line}: a runnable block without a command")
        blocks.append(block)
        i = j + 1
    return blocks


def pattern(expected):
    """A regex for the shown output: '…' alone is any lines, '…' in a line any text."""
    lines = [line.rstrip() for line in expected]
    while lines and not lines[-1]:
        lines.pop()
    parts = []
    for line in lines:
        if line == "…":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in line.split("…")) + r"\n")
    return re.compile("".join(parts))


def normalise(output):
    lines = [line.rstrip() for line in output.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "".join(line + "\n" for line in lines)


def scratch_copy(root, into):
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"],
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = root / name
        if not source.is_file() or source.is_symlink():
            continue  # deleted in the working tree, or a link (the venv): not part of the copy
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    git = ["git", "-C", str(into), "-c", "user.name=docs-test", "-c", "user.email=docs-test@localhost"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "scratch"], check=True)


LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


def broken_links(path, root):
    failures, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            name, _, anchor = target.partition("#")
            resolved = (path.parent / name).resolve() if name else path
            where = f"{path.relative_to(root)}:{number}"
            if not resolved.exists():
                failures.append(f"{where}: link to {target}: no such file")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                failures.append(f"{where}: link to {target}: no such heading")
    return failures


def porcelain(path):
    return subprocess.run(["git", "-C", str(path), "status", "--porcelain"], check=True, capture_output=True,
                          text=True).stdout


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    binary = Path(sys.argv[1]).resolve()
    root = Path(sys.argv[2]).resolve()
    if subprocess.run(["git", "-C", str(root), "rev-parse"], capture_output=True).returncode != 0:
        print(f"{root} is not a git checkout: skipped")
        return 77
    files = [root / "README.md"] + sorted((root / "docs").rglob("*.md"))
    blocks = [block for path in files for block in parse(path, root)]
    before = porcelain(root)
    failures = [failure for path in files for failure in broken_links(path, root)]
    ran = 0
    with tempfile.TemporaryDirectory(prefix="zinf-docs-") as scratch:
        copy = Path(scratch) / "repo"
        tmp = Path(scratch) / "tmp"
        tmp.mkdir()
        scratch_copy(root, copy)
        env = dict(os.environ, NO_COLOR="1", TMPDIR=str(tmp), PATH=f"{binary.parent}{os.pathsep}{os.environ['PATH']}")
        for block in blocks:
            for line, command, expected in block.steps:
                where = f"{block.path}:{line}"
                run = command.replace("build/default/bin/zinf", str(binary))
                try:
                    done = subprocess.run(["bash", "-c", run], cwd=copy, env=env, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                          timeout=COMMAND_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    failures.append(f"{where}: `{command}` ran past {COMMAND_TIMEOUT_S} s")
                    continue
                ran += 1
                if done.returncode != block.exit_code:
                    failures.append(f"{where}: `{command}` exited {done.returncode}, the doc says "
                                    f"{block.exit_code}; its output:\n{done.stdout}")
                    continue
                if expected is not None and not pattern(expected).fullmatch(normalise(done.stdout)):
                    failures.append(f"{where}: `{command}` printed what the doc does not show.\n"
                                    f"--- shown\n" + "\n".join(expected).rstrip() + "\n--- printed\n" +
                                    done.stdout.rstrip())
        left = porcelain(copy)
        if left:
            failures.append("the documented commands left the working tree changed (write run outputs under "
                            f"an ignored folder such as runs/):\n{left}")
    after = porcelain(root)
    if after != before:
        failures.append(f"the checkout's git status changed while the test ran:\nbefore:\n{before}after:\n{after}")
    for failure in failures:
        print(f"FAIL {failure}\n", file=sys.stderr)
    print(f"{ran} commands in {len(blocks)} runnable blocks of {len(files)} files; {len(failures)} failures")
    return 1 if failures or not blocks else 0


if __name__ == "__main__":
    sys.exit(main())
