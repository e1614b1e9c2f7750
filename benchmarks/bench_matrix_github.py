"""`envgen matrix github` over a GPU matrix of N cells, every cell locked and verified (0
changed) and with one cell re-locked (1 changed), timed through the CLI (process start
included) and as a library call.

    python benchmarks/bench_matrix_github.py [--sizes 100 1000 10000] [--runs 5]

Cells are real combination ids from the committed matrix (the resolver's feasible
combinations); each gets a lock manifest and one valid schema-1 result record for its lock
hash (made from tests/fixtures/results/ds-gpu-pass.json), so the run reads and validates
N manifests and N records like it would in CI.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envgen.ci.cells import github_matrix, load_cells  # noqa: E402
from envgen.facts import load_facts  # noqa: E402
from envgen.resolve import resolve  # noqa: E402
from envgen.resolve.request import Request  # noqa: E402
from envgen.results.record import ResultRecord  # noqa: E402
from envgen.results.store import load, record_path, render  # noqa: E402

TEMPLATE = json.loads((ROOT / "tests/fixtures/results/ds-gpu-pass.json").read_text())


def ids(n: int) -> list[str]:
    combos = resolve(Request(), load_facts(ROOT / "matrix"), limit=None)
    if len(combos) < n:
        sys.exit(f"the matrix has only {len(combos)} feasible combinations")
    step = len(combos) / n
    return [combos[int(i * step)].id for i in range(n)]


def setup(root: Path, cids: list[str]) -> tuple[Path, Path, Path]:
    cells, locks, results = root / "cells.toml", root / "locks", root / "results"
    cells.write_text("".join(f'[[cell]]\ncombination = "{c}"\n\n' for c in cids))
    for cid in cids:
        h = "sha256:" + hashlib.sha256(cid.encode()).hexdigest()
        (locks / cid).mkdir(parents=True)
        (locks / cid / "envgen.lock.json").write_text(json.dumps({"id": cid, "lock_hash": h}))
        record = ResultRecord.from_dict({**TEMPLATE, "combination": cid, "lock_hash": h})
        path = record_path(results, record)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(render(record))
    return cells, locks, results


def timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    print(f"{'cells':>7} {'changed':>7} {'due':>5} {'library ms':>11} {'CLI ms':>8}")
    for n in args.sizes:
        cids = ids(n)
        with tempfile.TemporaryDirectory(prefix="envgen-bench-gh-") as tmp:
            cells, locks, results = setup(Path(tmp), cids)
            for changed in (0, 1):
                if changed:
                    (locks / cids[0] / "envgen.lock.json").write_text(
                        json.dumps({"id": cids[0], "lock_hash": "sha256:" + "f" * 64}))

                def library(cells=cells, locks=locks, results=results):
                    verified = {s.record.lock_hash for s in load(results)}
                    return github_matrix(load_cells(cells), locks, verified)

                due = len(library()[0]["include"])
                lib = timed(library, args.runs)
                cmd = [sys.executable, "-m", "envgen", "matrix", "github", "--cells",
                       str(cells), "--locks", str(locks), "--results-dir", str(results), "-q"]
                cli = timed(lambda cmd=cmd: subprocess.run(cmd, check=True,
                                                           capture_output=True), args.runs)
                print(f"{n:7} {changed:7} {due:5} {lib * 1000:11.1f} {cli * 1000:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
