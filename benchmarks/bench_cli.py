"""Start-up cost of the CLI: median wall time of each command as a subprocess, and its ratio
to ``python -c pass`` (issue 40 budget: ``envgen --version`` ≤ 3x, ``envgen resolve`` for one
request ≤ 6x, a completion request ≤ 8x; the exit status is 1 when a ratio misses its budget).

Commands, run round-robin (one of each per round, so a busy machine slows all alike; the
medians are paired in one run):

- ``python -c pass``: the interpreter alone (the baseline);
- ``envgen --version``;
- ``envgen resolve --framework deepspeed --cuda 12.1``: one request, facts from the compiled
  copy (a first run writes it); ``envgen`` is the installed console script (what users run),
  and the same request is also timed through ``python -m envgen`` (which adds runpy's
  imports);
- completion: what a shell's TAB after ``envgen resolve --framework`` runs (argcomplete's
  protocol: ``_ARGCOMPLETE=1`` and the line in the environment; the candidates, the matrix's
  frameworks, written to a file instead of fd 8);
- import: ``import envgen.facts, envgen.resolve`` (the resolver's import cost);
- library: the same request through the library, no CLI (import, load through the compiled
  copy, resolve, what decided, print the best id);
- floor: the standard-library modules the resolve command imports (found by running it), and
  no envgen code: what any plain-Python resolve pays before its own work (``dataclasses``
  alone imports ``inspect``, ``ast``, ``dis`` and ``tokenize``);
- floor + classes: the same imports, then as many standard dataclasses as resolve defines,
  each with the same number of fields and the same options (what defining the records costs:
  each ``@dataclass`` compiles its methods with ``exec``).

``--importtime`` also prints the slowest imports of the library run (``python -X
importtime``, self times summed per top-level package).

Run: ``python benchmarks/bench_cli.py [--repeat N] [--matrix-dir DIR] [--importtime]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from timing import envgen_command, installed_env, paired_ms

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = """
from envgen.facts import find_matrix_dir, load_facts
from envgen.resolve import Request, decisions, resolve
facts = load_facts(find_matrix_dir({md!r}))
request = Request(framework="deepspeed", cuda="12.1")
best = resolve(request, facts)[0]
print(best.id, len(decisions(request, facts, best)))
"""


COMPLETION = "completion request (envgen resolve --framework TAB)"
FLOOR = "floor: the stdlib modules resolve imports, no envgen"
CLASSES = "floor + the dataclasses resolve defines, no envgen code"
# the modules `envgen resolve` loaded, less those of a bare interpreter, printed by a run
_LOADED = """
import runpy, sys
before = set(sys.modules)
sys.argv = ["envgen", *{argv!r}]
try:
    runpy.run_module("envgen", run_name="__main__")
except SystemExit:
    pass
sys.stdout = sys.__stdout__
print(repr([(len(c.__dataclass_fields__), dict((k, getattr(c.__dataclass_params__, k)) for k in
             ("frozen", "eq", "order")), "__slots__" in vars(c))
            for m in list(sys.modules.values()) if m and m.__name__.startswith("envgen")
            for c in vars(m).values()
            if isinstance(c, type) and c.__module__ == m.__name__
            and "__dataclass_fields__" in vars(c)]))
print(" ".join(sorted(set(sys.modules) - before)))
"""
# one standard dataclass as resolve defines it: its field count and options (the names and
# annotations do not change what defining it costs)
_CLASS = """
@dataclasses.dataclass({opts})
class C{i}:
{fields}
"""


def stdlib_floor(request: list[str], env: dict[str, str]) -> tuple[str, str]:
    """Two ``-c`` programs: one importing the top-level standard-library modules that
    ``envgen resolve`` imports (nothing of envgen or of other installed packages), and the
    same followed by defining as many standard dataclasses as resolve defines, each with the
    same number of fields and options (frozen, eq, order, slots)."""
    import ast
    import sysconfig

    out = subprocess.run([sys.executable, "-c", _LOADED.format(argv=request)], cwd=ROOT,
                         env=env, check=True, capture_output=True, text=True).stdout
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    names = []
    *_, classes_line, modules_line = out.splitlines()
    for name in modules_line.split():
        if "." in name or name.startswith("_"):
            continue
        where = getattr(__import__(name), "__file__", None)  # None: built into the interpreter
        if where is None or (Path(where).resolve().is_relative_to(stdlib)
                             and "site-packages" not in where):
            names.append(name)
    imports = "import " + ", ".join(names)
    defs = [_CLASS.format(i=i, opts=", ".join(
        [f"{k}={v}" for k, v in opts.items()] + (["slots=True"] if slots else [])),
        fields="\n".join(f"    f{j}: int = 0" for j in range(n)) or "    pass")
        for i, (n, opts, slots) in enumerate(ast.literal_eval(classes_line))]
    return imports, "\n".join([imports, "import dataclasses", *defs])


def commands(matrix_dir: str | None) -> dict[str, list[str]]:
    py, envgen = sys.executable, envgen_command()
    md = ["--matrix-dir", matrix_dir] if matrix_dir else []
    request = [*md, "resolve", "--framework", "deepspeed", "--cuda", "12.1"]
    return {
        "python -c pass": [py, "-c", "pass"],
        "envgen --version": [*envgen, "--version"],
        "envgen resolve (one request)": [*envgen, *request],
        "python -m envgen resolve (one request)": [py, "-m", "envgen", *request],
        COMPLETION: envgen,
        "import envgen.facts, envgen.resolve": [py, "-c", "import envgen.facts, envgen.resolve"],
        "library: load + resolve + why": [py, "-c", LIBRARY.format(md=matrix_dir)],
    }


def completion_env(env: dict[str, str], answers: Path, matrix_dir: str | None) -> dict[str, str]:
    """``env`` as a shell's completion function sets it for ``envgen resolve --framework ``."""
    line = "envgen resolve --framework "
    return {**env, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line)),
            "_ARGCOMPLETE_STDOUT_FILENAME": str(answers),
            **({"ENVGEN_MATRIX_DIR": matrix_dir} if matrix_dir else {})}


TARGETS = {"envgen --version": 3.0, "envgen resolve (one request)": 6.0, COMPLETION: 8.0}


def importtime(argv: list[str], top: int = 15) -> list[tuple[str, int]]:
    """(package, self µs summed) of the slowest top-level packages ``argv`` imports."""
    err = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], capture_output=True,
                         text=True, cwd=ROOT).stderr
    per: dict[str, int] = {}
    for line in err.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cum, name = (p.strip() for p in line[len("import time:"):].split("|"))
        name = name.strip()
        key = ".".join(name.split(".")[:2]) if name.startswith("envgen") else \
            name.split(".")[0]
        per[key] = per.get(key, 0) + int(self_us)
    return sorted(per.items(), key=lambda kv: -kv[1])[:top]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--matrix-dir", default=None)
    ap.add_argument("--importtime", action="store_true")
    ap.add_argument("--json", action="store_true", help="print results as JSON")
    args = ap.parse_args()
    cmds = commands(args.matrix_dir)
    env = installed_env()  # as an installed envgen runs: byte code cached
    request = cmds["envgen resolve (one request)"][len(envgen_command()):]
    floor, classes = stdlib_floor(request, env)
    cmds[FLOOR] = [sys.executable, "-c", floor]
    cmds[CLASSES] = [sys.executable, "-c", classes]
    answers = Path(installed_env()["PYTHONPYCACHEPREFIX"]).with_name("envgen-bench-completion")
    envs = {name: completion_env(env, answers, args.matrix_dir) if name == COMPLETION else env
            for name in cmds}
    for name, argv in cmds.items():  # warm: byte code, the compiled facts, the page cache
        subprocess.run(argv, cwd=ROOT, env=envs[name], check=True, capture_output=True)
    if "deepspeed" not in answers.read_text():
        raise SystemExit(f"the completion request answered {answers.read_text()!r}")
    ms = paired_ms({name: (lambda a=argv, e=envs[name]: subprocess.run(
        a, cwd=ROOT, env=e, check=True, stdout=subprocess.DEVNULL)) for name, argv in cmds.items()},
        args.repeat)
    os.unlink(answers)
    base = ms["python -c pass"]
    results = {name: {"median_ms": round(m, 1), "ratio": round(m / base, 2),
                      "target": TARGETS.get(name)} for name, m in ms.items()}
    if args.importtime:
        results["importtime_self_us"] = dict(importtime(cmds["library: load + resolve + why"]))

    missed = [name for name, r in results.items()
              if isinstance(r, dict) and r.get("target") and r["ratio"] > r["target"]]
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return 1 if missed else 0
    print(f"median wall time of {args.repeat} runs each, round-robin; ratio to python -c pass")
    for name in cmds:
        r = results[name]
        target = f"  (target ≤ {r['target']:.0f}x)" if r["target"] else ""
        print(f"  {r['median_ms']:>7.1f} ms  {r['ratio']:>5.2f}x  {name}{target}")
    if args.importtime:
        print("slowest imports of the library run (self time, summed per package):")
        for name, us in results["importtime_self_us"].items():
            print(f"  {us / 1e3:>7.1f} ms  {name}")
    for name in missed:
        print(f"over budget: {name}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
