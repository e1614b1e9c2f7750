"""`envgen matrix github` against a plain standard-library script over the same files
(benchmarks/plain_matrix_github.py), both timed as subprocesses (process start included), in
turn: one run of each per round.

    python benchmarks/bench_matrix_github.py [--sizes 0 100 1000 10000] [--repeat 7]

Size 0 is the committed matrix (matrix/cells.toml, matrix/results, ./locks). Size N is a GPU
matrix of N cells, every cell locked and verified (0 changed) and then with one cell re-locked
(1 changed); the cells are real combination ids from the committed matrix (the resolver's
feasible combinations), each with a lock manifest and one valid schema-1 result record for its
lock hash (made from tests/fixtures/results/ds-gpu-pass.json), so both read N manifests and N
records like CI would. Each case first checks that both print the same matrix (stdout) and the
same summary (stderr); then it prints the medians, their ratio (target ≤ 1.5), and envgen's
library call (`github_matrix(read_cells(...), locks, verified_lock_hashes(...))`) in process.
envgen's record index (envgen/results/index.py) is warm after the first run, as it is on any
machine that ran the command before; `--cold` turns it off (ENVGEN_RECORDS_CACHE=0).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from timing import envgen_command, installed_env, median_ms, paired_ms  # noqa: E402

from envgen.ci.github import github_matrix  # noqa: E402
from envgen.facts.cells import read_cells  # noqa: E402
from envgen.results.store import verified_lock_hashes  # noqa: E402

PLAIN = ROOT / "benchmarks" / "plain_matrix_github.py"
TEMPLATE = ROOT / "tests" / "fixtures" / "results" / "ds-gpu-pass.json"


def ids(n: int) -> list[str]:
    from envgen.facts import load_facts
    from envgen.resolve import resolve
    from envgen.resolve.request import Request

    combos = resolve(Request(), load_facts(ROOT / "matrix"), limit=None)
    if len(combos) < n:
        sys.exit(f"the matrix has only {len(combos)} feasible combinations")
    step = len(combos) / n
    return [combos[int(i * step)].id for i in range(n)]


def setup(root: Path, cids: list[str]) -> tuple[Path, Path, Path]:
    from envgen.results.record import ResultRecord
    from envgen.results.store import record_path, render

    template = json.loads(TEMPLATE.read_text())
    cells, locks, results = root / "cells.toml", root / "locks", root / "results"
    cells.write_text("".join(f'[[cell]]\ncombination = "{c}"\n\n' for c in cids))
    for cid in cids:
        h = "sha256:" + hashlib.sha256(cid.encode()).hexdigest()
        (locks / cid).mkdir(parents=True)
        (locks / cid / "envgen.lock.json").write_text(json.dumps({"id": cid, "lock_hash": h}))
        record = ResultRecord.from_dict({**template, "combination": cid, "lock_hash": h})
        path = record_path(results, record)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(render(record))
    return cells, locks, results


def compare(cells: Path, locks: Path, results: Path, repeat: int, env: dict) -> tuple:
    """(due, plain ms, envgen ms, library ms), after checking both print the same."""
    envgen = [*envgen_command(), "matrix", "github", "--cells", str(cells),
              "--locks", str(locks), "--results-dir", str(results)]
    plain = [sys.executable, str(PLAIN), str(cells), str(locks), str(results)]
    a = subprocess.run(envgen, capture_output=True, text=True, env=env, cwd=ROOT)
    b = subprocess.run(plain, capture_output=True, text=True, env=env, cwd=ROOT)
    if a.returncode or b.returncode or a.stdout != b.stdout or \
            a.stderr.splitlines()[-1:] != b.stderr.splitlines()[-1:]:
        sys.exit(f"outputs differ:\nenvgen: {a.stdout[:300]}{a.stderr[-300:]}\n"
                 f"plain: {b.stdout[:300]}{b.stderr[-300:]}")
    run = {"env": env, "cwd": ROOT, "check": True, "capture_output": True}
    t = paired_ms({"plain": lambda: subprocess.run(plain, **run),
                   "envgen": lambda: subprocess.run(envgen, **run)}, repeat)
    t_plain, t_envgen = t["plain"], t["envgen"]
    t_lib = median_ms(lambda: github_matrix(read_cells(cells), locks,
                                            verified_lock_hashes([results])), repeat)
    return len(json.loads(a.stdout)["include"]), t_plain, t_envgen, t_lib


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[0, 100, 1000, 10000],
                   help="cells (0: the committed matrix)")
    p.add_argument("--repeat", type=int, default=7, help="runs per median")
    p.add_argument("--cold", action="store_true", help="without envgen's record index")
    args = p.parse_args()
    os.environ["ENVGEN_RECORDS_CACHE"] = "0" if args.cold else "1"
    env = installed_env()  # both sides run from cached byte code, as installed code does
    print(f"{'cells':>7} {'changed':>7} {'due':>5} {'plain ms':>9} {'envgen ms':>10} "
          f"{'ratio':>6} {'library ms':>11}")
    for n in args.sizes:
        if n == 0:
            row = compare(ROOT / "matrix" / "cells.toml", ROOT / "locks",
                          ROOT / "matrix" / "results", args.repeat, env)
            print(f"{'matrix':>7} {'-':>7} {row[0]:5} {row[1]:9.1f} {row[2]:10.1f} "
                  f"{row[2] / row[1]:6.2f} {row[3]:11.1f}")
            continue
        cids = ids(n)
        with tempfile.TemporaryDirectory(prefix="envgen-bench-gh-") as tmp:
            cells, locks, results = setup(Path(tmp), cids)
            for changed in (0, 1):
                if changed:
                    (locks / cids[0] / "envgen.lock.json").write_text(
                        json.dumps({"id": cids[0], "lock_hash": "sha256:" + "f" * 64}))
                row = compare(cells, locks, results, args.repeat, env)
                print(f"{n:7} {changed:7} {row[0]:5} {row[1]:9.1f} {row[2]:10.1f} "
                      f"{row[2] / row[1]:6.2f} {row[3]:11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
