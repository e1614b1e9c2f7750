"""`envgen table` against a plain standard-library script over the same files
(benchmarks/plain_table.py), both timed as subprocesses (process start included), in turn:
one run of each per round.

    python benchmarks/bench_table.py [--sizes 0 1000 10000] [--repeat 7]

Size 0 is the committed matrix and its records (matrix/results). Size N is N records over N/2
real combination ids of the committed matrix (the resolver's feasible combinations), made from
the record fixtures of both kinds (tests/fixtures/results: T1 and T2 attempts, passing and
failing GPU and CPU verify runs) with their combination and times changed. The plain script is
given what only the resolver knows (the frameworks' order and the resolver's best combination
per framework × torch × CUDA, written by envgen before timing); everything else (reading the
records, tiers, citations, the Markdown page and the JSON) both do. Each case first checks
that both print the same page (`envgen table`) and the same JSON (`envgen table --json`), then
prints the medians and their ratio (target ≤ 1.5). envgen's record index
(envgen/results/index.py) and compiled facts are warm after the first run, as on any machine
that ran a command before; `--cold` turns the record index off (ENVGEN_RECORDS_CACHE=0).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import envgen_command, installed_env, paired_ms

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PLAIN = ROOT / "benchmarks" / "plain_table.py"
FIXTURES = ROOT / "tests" / "fixtures" / "results"


def candidates(path: Path) -> None:
    """What only the resolver knows, for the plain script."""
    from envgen.facts import load_facts
    from envgen.results.selector_markup import selector_markup
    from envgen.results.table import untested_candidates

    facts = load_facts(ROOT / "matrix")
    path.write_text(json.dumps({"frameworks": list(facts.framework_names),
                                "candidates": [c.id for c in untested_candidates(facts)],
                                "markup": selector_markup()}))


def setup(results: Path, n: int) -> None:
    """``n`` records over n/2 combinations, from the fixtures of both kinds."""
    from envgen.facts import load_facts
    from envgen.resolve import resolve
    from envgen.resolve.request import Request
    from envgen.results.store import parse_any, record_path, render

    combos = resolve(Request(), load_facts(ROOT / "matrix"), limit=None)
    pairs = max(1, n // 2)
    if len(combos) < pairs:
        sys.exit(f"the matrix has only {len(combos)} feasible combinations")
    step = len(combos) / pairs
    cids = [combos[int(i * step)].id for i in range(pairs)]
    templates = [json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))]
    made = 0
    for i in range(n):
        data = dict(templates[i % len(templates)])
        day, second = 1 + (i // 7) % 28, i % 3600
        data["combination"] = cids[(i // 2) % pairs]
        data["started"] = f"2026-05-{day:02d}T{second // 60 % 24:02d}:00:00Z"
        data["finished"] = f"2026-05-{day:02d}T{second // 60 % 24:02d}:{second % 60:02d}:30Z"
        record, _ = parse_any(data)
        if record is None:
            continue
        path = record_path(results, record)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(render(record))
        made += 1
    if made < n // 2:
        sys.exit(f"only {made} of {n} records could be made from the fixtures")


def compare(results: Path, cands: Path, repeat: int, env: dict, label: str) -> None:
    for json_flag in ((), ("--json",)):
        page = () if json_flag else ("--markdown",)  # a terminal gets a table, not the page
        envgen = [*envgen_command(), *json_flag, "table", *page, "--results-dir",
                  str(results)]
        plain = [sys.executable, str(PLAIN), str(ROOT / "matrix"), str(results), str(cands),
                 *json_flag]
        a = subprocess.run(envgen, capture_output=True, text=True, env=env, cwd=ROOT)
        b = subprocess.run(plain, capture_output=True, text=True, env=env, cwd=ROOT)
        if a.returncode or b.returncode or a.stdout != b.stdout:
            for name, proc in (("envgen", a), ("plain", b)):
                out = Path(tempfile.gettempdir()) / f"bench-table-{name}.txt"
                out.write_text(proc.stdout)
                print(f"{name}: exit {proc.returncode}, stdout in {out}\n{proc.stderr[-600:]}")
            sys.exit("outputs differ")
        rows = len(json.loads(a.stdout)["rows"]) if json_flag else a.stdout.count("\n| ") - 6
        run = {"env": env, "cwd": ROOT, "check": True, "capture_output": True}
        t = paired_ms({"plain": lambda: subprocess.run(plain, **run),  # noqa: B023
                       "envgen": lambda: subprocess.run(envgen, **run)}, repeat)  # noqa: B023
        t_plain, t_envgen = t["plain"], t["envgen"]
        print(f"{label:>8} {'json' if json_flag else 'md':>5} {rows:6} {t_plain:9.1f} "
              f"{t_envgen:10.1f} {t_envgen / t_plain:6.2f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[0, 1000, 10000],
                   help="records (0: the committed ones)")
    p.add_argument("--repeat", type=int, default=7, help="runs per median")
    p.add_argument("--cold", action="store_true", help="without envgen's record index")
    args = p.parse_args()
    os.environ["ENVGEN_RECORDS_CACHE"] = "0" if args.cold else "1"
    env = installed_env()  # both sides run from cached byte code, as installed code does
    with tempfile.TemporaryDirectory(prefix="envgen-bench-table-") as tmp:
        cands = Path(tmp) / "candidates.json"
        candidates(cands)
        print(f"{'records':>8} {'out':>5} {'rows':>6} {'plain ms':>9} {'envgen ms':>10} "
              f"{'ratio':>6}")
        for n in args.sizes:
            if n == 0:
                compare(ROOT / "matrix" / "results", cands, args.repeat, env, "matrix")
                continue
            results = Path(tmp) / f"results-{n}"
            setup(results, n)
            compare(results, cands, args.repeat, env, str(n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
