#!/usr/bin/env python3
"""Unity-build groups without clashes: proposes them, and checks the ones a build compiles.

A CMake unity build (ZINF_UNITY_BUILD, cmake/ZinfUnity.cmake) compiles several .cpp files of one
target as one translation unit, so what each file keeps to itself -- anonymous-namespace and
`static` functions, variables, types, and `#define`s not #undef'd -- meets the other files' names.
Two same-named functions with the same signature fail to compile; with different signatures they
become overloads and a call may silently pick the other file's, which no compiler error reports.
So a name defined file-locally in one source of a unity file is a clash when another source of it
defines it too or, for a macro, mentions it (identical `using X = Y;` aliases and `using ns::X;`
declarations excepted), and so is a type alias declared inside a function or class of one file
with the name of another's file-local one (-Wshadow). Not seen: a file-local name that hides a namespace-scope function a
neighbour calls unqualified (an anonymous-namespace `split` against the `zinf::split` of the next
file); the compiler has rejected each such case so far, and ALONE below keeps those sources out.

  scripts/unity-clashes.py check BUILD_DIR
      every unity file a configured build compiles (CMakeFiles/<target>.dir/Unity/unity_*.cxx):
      prints each clash; exit 1 when there is one (ctest -R unity_clashes runs this).
  scripts/unity-clashes.py groups BUILD_DIR [--size N] [--write FILE]
      BUILD_DIR configured with -DZINF_UNITY_BUILD=OFF (so compile_commands.json lists every
      source) and with CUDA and MPI found (so their sources are seen): assigns the sources of every
      zinf_* library but the kernels (and the fuzz drivers) to groups of at most N (default 8) in which no two clash, and
      prints (or writes to FILE) the CMake file that sets their UNITY_GROUP (cmake/ZinfUnityGroups.cmake).

The scan is a small C++ lexer (comments, strings, braces, namespace scope), a heuristic that errs
towards reporting. Exit status: 0 fine, 1 a clash (check), 2 bad usage.
"""
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

KEYWORDS = {
    "if", "for", "while", "switch", "return", "sizeof", "alignof", "decltype", "noexcept", "static_assert",
    "operator", "template", "typename", "const", "constexpr", "consteval", "constinit", "inline", "static",
    "auto", "void", "int", "bool", "char", "double", "float", "long", "unsigned", "signed", "short",
    "struct", "class", "enum", "union", "using", "namespace", "extern", "thread_local", "mutable",
    "requires", "explicit", "virtual", "friend", "volatile", "default", "delete", "true", "false",
    "nullptr", "this", "throw", "new", "override", "final",
}


def strip(src: str) -> str:
    """Blanks comments, string and character literals (raw strings too), keeping line structure."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * src.count("\n", i, j))
            i = j
        elif c == "R" and src.startswith('R"', i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', src[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = src.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * src.count("\n", i, end))
            i = end
        elif c in "\"'":
            if c == "'" and i > 0 and src[i - 1].isalnum():  # digit separator 1'000
                i += 1
                continue
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def declared_name(stmt: str):
    """The name a namespace-scope declaration introduces, or None."""
    s = " ".join(stmt.split())
    s = re.sub(r"^template\s*<.*?>\s*", "", s)
    s = re.sub(r"\[\[.*?\]\]", "", s).strip()
    if not s or s.startswith(("using namespace", "namespace", "extern \"", "static_assert", "friend")):
        return None
    m = re.match(r"^(?:enum\s+(?:class|struct)\s+|enum\s+|struct\s+|class\s+|union\s+)(\w+)", s)
    if m:
        return m.group(1)
    m = re.match(r"^using\s+(\w+)\s*=", s)
    if m:
        return m.group(1)
    # function: the identifier before the first '(' that is not inside <...>
    depth, head = 0, ""
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch in "(=[{;" and depth == 0:
            break
        head += ch
    if "operator" in head:
        return None
    plain = re.sub(r"<[^<>]*>", " ", head)
    # a qualified name (`Command::run`, `Table::kWidth`) defines a member or a namespace's entity
    # that was declared elsewhere, not a new file-local name: two files' `A::run` and `B::run` do
    # not meet (their classes' names, which do, are scanned where the classes are defined)
    if re.search(r"::\s*~?\s*\w+\s*$", plain):
        return None
    ids = [t for t in re.findall(r"[A-Za-z_]\w*", plain) if t not in KEYWORDS]
    return ids[-1] if ids else None


def file_locals(path: Path):
    """Names defined file-locally in one source: anonymous namespaces, namespace-scope statics, macros."""
    text = strip(path.read_text(errors="replace"))
    names, macros = set(), {}
    for m in re.finditer(r"^\s*#\s*(define|undef)\s+(\w+)", text, re.M):
        if m.group(1) == "define":
            macros[m.group(2)] = True
        else:
            macros.pop(m.group(2), None)
    names |= {"#" + k for k in macros}
    text = re.sub(r"^\s*#.*?(?<!\\)$", "", text, flags=re.M | re.S)
    stack = []  # 'anon' | 'ns' | 'other' per open brace
    stmt = ""
    i = 0
    while i < len(text):
        c = text[i]
        at_ns_scope = all(k in ("anon", "ns") for k in stack)
        if c == "{":
            s = stmt.strip()
            if re.fullmatch(r"(inline\s+)?namespace", s):
                stack.append("anon")
            elif re.fullmatch(r"(inline\s+)?namespace\s+[\w:]+", s):
                stack.append("ns")
            elif re.fullmatch(r'extern\s*""', s):
                stack.append("ns")
            else:
                if at_ns_scope and s:
                    local = "anon" in stack or re.match(r"^(template\s*<.*?>\s*)?static\b", s) is not None
                    # a brace-initialised variable or a body: both define the name
                    if local:
                        name = declared_name(s)
                        if name:
                            names.add(name)
                stack.append("other")
            stmt = ""
        elif c == "}":
            if stack:
                stack.pop()
            stmt = ""
        elif c == ";":
            if at_ns_scope:
                s = stmt.strip()
                local = "anon" in stack or re.match(r"^(template\s*<.*?>\s*)?(static|constexpr|const)\b", s)
                # namespace-scope const/constexpr variables have internal linkage too
                if local and s:
                    name = declared_name(s)
                    if name and not re.match(r"^(using|typedef)\b.*\(", s):
                        names.add(name)
            stmt = ""
        else:
            if at_ns_scope or c == "\n":
                stmt += c
        i += 1
    return names


ALIAS = re.compile(r"^using\s+(\w+)\s*=\s*(.*)$")


def scan(path: Path):
    """{name: what it names or None}: aliases and using-declarations keep their target, so that
    identical ones are not clashes."""
    names = {}
    for name in file_locals(path):
        names[name] = None
    text = path.read_text(errors="replace")
    for m in re.finditer(r"^\s*using\s+(\w+)\s*=\s*([^;]+);", text, re.M):
        if m.group(1) in names:
            names[m.group(1)] = " ".join(m.group(2).split())
    # using-declarations (`using reports::Cell;`) name another namespace's entity: repeating one is
    # allowed, two naming different entities are a clash
    for m in re.finditer(r"^\s*using\s+(?:typename\s+)?((?:\w+::)+(\w+))\s*;", text, re.M):
        if m.group(2) in names:
            names[m.group(2)] = m.group(1).split("::", 1)[-1] if m.group(1).startswith("::") else m.group(1)
    return names


def identifiers(path: Path):
    """Every identifier the source mentions outside comments and strings."""
    return set(re.findall(r"[A-Za-z_]\w*", strip(path.read_text(errors="replace"))))


# Sources that always compile alone, with why: file-local names that hide a namespace-scope function
# a neighbour calls unqualified, which the scan does not see (it compares definitions, not calls).
ALONE = {
    "probes/machine_probes.cpp": "its anonymous-namespace split(n, body) hides zinf::split, which "
                                 "process.cpp and io_bench_runner.cpp call",
}


def block_aliases(path: Path):
    """Names of the type aliases (`using X = ...;`) a source declares inside a function or class: in
    a unity file one shadows a neighbour's file-local X, which -Wshadow reports (an error here)."""
    return set(re.findall(r"^\s*using\s+(\w+)\s*=", strip(path.read_text(errors="replace")), re.M)) - set(scan(path))


def clashes(sources):
    """[(name, [sources])] for each file-local name of one source that another source defines too
    or, for a macro, mentions at all, or that another source's block-scope alias shadows."""
    local = {src: scan(src) for src in sources}
    mentions = {src: identifiers(src) for src in sources}
    inner = {src: block_aliases(src) for src in sources}
    out = {}
    for a in sources:
        for name in inner[a]:
            others = [b for b in sources if b != a and name in local[b]]
            if others:
                out.setdefault(name, set()).update([a, *others])
    for a in sources:
        for name, alias in local[a].items():
            macro = name.startswith("#")
            others = [b for b in sources if b != a and (name in local[b] or (macro and name[1:] in mentions[b]))]
            if not others:
                continue
            if alias is not None and all(local[b].get(name) == alias for b in others):
                continue  # the same alias or using-declaration in each: allowed
            out.setdefault(name, set()).update([a, *others])
    return [(name, sorted(owners)) for name, owners in sorted(out.items())]


def check(build: Path) -> int:
    units = sorted(build.glob("**/CMakeFiles/*.dir/Unity/unity_*.cxx"))
    if not units:
        print(f"unity-clashes: no unity files under {build} (configure with ZINF_UNITY_BUILD=ON)", file=sys.stderr)
        return 2
    bad = 0
    for unit in units:
        target = unit.parent.parent.name[: -len(".dir")]
        sources = [Path(p) for p in re.findall(r'#include "([^"]+)"', unit.read_text())]
        for name, owners in clashes(sources):
            bad += 1
            print(f"{target} {unit.name}: '{name.lstrip('#')}'{' (macro)' if name.startswith('#') else ''} "
                  f"is file-local in {', '.join(p.name for p in owners)}; regroup them "
                  "(scripts/unity-clashes.py groups) or rename one")
    print(f"unity-clashes: {len(units)} unity files, {bad} clash{'es' if bad != 1 else ''}")
    return 1 if bad else 0


def groups(build: Path, size: int, write) -> int:
    db = build / "compile_commands.json"
    if not db.is_file():
        print(f"unity-clashes: {db} not found (configure the build first)", file=sys.stderr)
        return 2
    cache = (build / "CMakeCache.txt").read_text()
    root = Path(re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", cache, re.M).group(1))
    by_target = defaultdict(list)
    for entry in json.loads(db.read_text()):
        out = entry.get("output") or entry["command"].split(" -o ")[1].split()[0]
        m = re.search(r"CMakeFiles/(zinf_\w+)\.dir/", out)
        src = Path(entry["file"])
        if "/Unity/" in str(src):
            print(f"unity-clashes: {build} is a unity build; configure it with -DZINF_UNITY_BUILD=OFF", file=sys.stderr)
            return 2
        if not m or m.group(1) == "zinf_kernels" or m.group(1).startswith("zinf_fuzz") or src.suffix != ".cpp" or root not in src.parents or build.resolve() in src.parents:
            continue  # the kernels are not batched; generated sources compile alone
        if str(src.relative_to(root)) in ALONE:
            continue
        by_target[m.group(1)].append(src)
    lines = [
        "# Generated by scripts/unity-clashes.py groups (do not edit by hand; rerun it after adding,",
        "# removing or renaming a source of a library). The unity groups of each library: sources of one",
        "# group share no file-local name (cmake/ZinfUnity.cmake). A source in no group compiles alone.",
    ]
    for target in sorted(by_target):
        sources = sorted(by_target[target])
        conflict = defaultdict(set)
        for name, owners in clashes(sources):
            for a in owners:
                conflict[a] |= set(owners) - {a}
        # as many groups as the size asks, sources spread evenly over them (so that the two cores stay
        # busy): each source, the most constrained first, joins the smallest group it does not clash
        # with; a new group only when every group clashes or is full
        parts = [[] for _ in range(-(-len(sources) // size))]
        for src in sorted(sources, key=lambda s: (-len(conflict[s]), str(s))):
            fits = [p for p in parts if len(p) < size and not (conflict[src] & set(p))]
            if fits:
                min(fits, key=len).append(src)
            else:
                parts.append([src])
        parts = sorted((sorted(p) for p in parts), key=lambda p: str(p[0]))
        lines.append(f"# {target}: {len(sources)} sources in {len(parts)} groups")
        for i, part in enumerate(parts, 1):
            if len(part) < 2:
                continue  # a group of one is a source compiled alone
            lines.append(f"zinf_unity_group({target} {target}_{i}")
            lines += [f"  ${{PROJECT_SOURCE_DIR}}/{s.relative_to(root)}" for s in part]
            lines[-1] += ")"
    text = "\n".join(lines) + "\n"
    if write:
        Path(write).write_text(text)
        print(f"unity-clashes: wrote {write}")
    else:
        sys.stdout.write(text)
    return 0


def main(argv):
    args = argv[1:]
    if not args or args[0] in ("-h", "--help") or args[0] not in ("check", "groups") or len(args) < 2:
        print(__doc__)
        return 2
    if args[0] == "check":
        return check(Path(args[1]))
    size, write, rest = 8, None, args[2:]
    while rest:
        if rest[0] == "--size" and len(rest) > 1 and rest[1].isdigit() and int(rest[1]) > 0:
            size, rest = int(rest[1]), rest[2:]
        elif rest[0] == "--write" and len(rest) > 1:
            write, rest = rest[1], rest[2:]
        else:
            print(f"unity-clashes: unknown argument '{rest[0]}' (allowed: --size N, --write FILE)", file=sys.stderr)
            return 2
    return groups(Path(args[1]), size, write)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
