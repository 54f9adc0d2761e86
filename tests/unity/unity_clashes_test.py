#!/usr/bin/env python3
"""scripts/unity-clashes.py check on hand-made unity files: each case is two sources that one unity
file includes, and whether the checker must call them a clash (exit 1, naming the name) or not."""
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The cases' hand-made unity files clash on purpose: they live in a temporary folder outside the
# build tree, because unity.clashes checks every unity file under the build folder and would report
# them (it did, when they were written there).
script = sys.argv[1]
work = Path(tempfile.mkdtemp(prefix="zinf-unity-clashes-"))

# (case, source a, source b, the clashing name or None)
CASES = [
    ("same anonymous function", "namespace {\nint helper(int x) { return x; }\n}\n",
     "namespace zinf {\nnamespace {\nint helper(int x) { return x + 1; }\n}  // namespace\n}\n", "helper"),
    # the silent case: a different signature would become an overload, not a compile error
    ("overload across files", "namespace {\nstd::string text(double v) { return {}; }\n}\n",
     "namespace {\nstd::string text(int v) { return {}; }\n}\n", "text"),
    ("static function", "static bool ready() { return true; }\n", "static bool ready() { return false; }\n", "ready"),
    ("namespace-scope constant", "namespace zinf {\nconstexpr int kMiB = 1 << 20;\n}\n",
     "namespace zinf {\nnamespace {\nconstexpr std::size_t kMiB = 1024 * 1024;\n}\n}\n", "kMiB"),
    ("type", "namespace {\nstruct Cell {\n  int v;\n};\n}\n", "namespace {\nenum class Cell { kA };\n}\n", "Cell"),
    ("macro", "#define CHECK_OK(x) (x)\nint f() { return CHECK_OK(1); }\n",
     "#define CHECK_OK(x) (!(x))\nint g() { return CHECK_OK(1); }\n", "CHECK_OK"),
    ("same alias", "namespace {\nusing json = nlohmann::json;\n}\n", "namespace {\nusing json = nlohmann::json;\n}\n", None),
    ("same using-declaration", "namespace {\nusing reports::Cell;\n}\n", "namespace {\nusing reports::Cell;\n}\n", None),
    ("different aliases", "namespace {\nusing Clock = std::chrono::steady_clock;\n}\n",
     "namespace {\nusing Clock = std::chrono::system_clock;\n}\n", "Clock"),
    ("undefined macro", "#define LOCAL 1\nint f() { return LOCAL; }\n#undef LOCAL\n", "int g() { return 2; }\n", None),
    # out-of-class member definitions: each names its own class's member, so only the classes meet
    ("members of different classes", "namespace {\nclass A {\n  int run();\n};\nint A::run() { return 1; }\n}\n",
     "namespace {\nclass B {\n  int run();\n};\nint B::run() { return 2; }\n}\n", None),
    ("members of same-named classes", "namespace {\nclass A {\n  int run();\n};\nint A::run() { return 1; }\n}\n",
     "namespace {\nstruct A {\n  int run();\n};\nint A::run() { return 2; }\n}\n", "A"),
    # -Wshadow: a function's alias shadows the neighbour's file-local one, even when both are the same
    ("block alias shadows a file-local one", "namespace {\nusing Clock = std::chrono::steady_clock;\n}\n",
     "namespace {\nint wait() {\n  using Clock = std::chrono::steady_clock;\n  return 0;\n}\n}\n", "Clock"),
    ("macro mentioned by a neighbour", "#define kBlock 4096\n", "int blocks(int n) { return n / kBlock; }\n", "kBlock"),
]

failures = 0
for i, (case, a, b, name) in enumerate(CASES):
    build = work / f"case{i}"
    unity = build / "lib" / "CMakeFiles" / "zinf_x.dir" / "Unity"
    unity.mkdir(parents=True)
    (build / "a.cpp").write_text(a)
    (build / "b.cpp").write_text(b)
    (unity / "unity_0_cxx.cxx").write_text(f'#include "{build / "a.cpp"}"\n\n#include "{build / "b.cpp"}"\n\n')
    run = subprocess.run([sys.executable, script, "check", str(build)], capture_output=True, text=True)
    want = 1 if name else 0
    if run.returncode != want or (name and f"'{name}'" not in run.stdout):
        failures += 1
        print(f"FAIL {case}: exit {run.returncode} (want {want}), output:\n{run.stdout}{run.stderr}")
    else:
        print(f"ok   {case}")
shutil.rmtree(work, ignore_errors=True)
sys.exit(1 if failures else 0)
