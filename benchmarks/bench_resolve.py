"""Resolver benchmarks over the committed snapshot in matrix/.

1. enumerate: walk every feasible combination (all framework releases × torch builds × CUDA ×
   Python × OS, both platforms); report the count and the median time (snapshot preloaded).
2. single: load the snapshot from disk (all in-process caches cleared, as in a fresh process;
   the compiled copy in the user cache, envgen/facts/compiled.py, is used as a later run would)
   and answer one request (top 10); median per request. Also once without the compiled copy:
   the first run after the matrix changed, which parses and validates every file.
3. cli: wall time of `envgen resolve ...` as a subprocess (Python start-up included).

Run: `python benchmarks/bench_resolve.py [--repeat N] [--matrix-dir DIR]` or `nox -s bench`.
Targets (2-core machine): enumerate ≤ 1 s, single ≤ 50 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from envgen import versions
from envgen.facts import find_matrix_dir, load_facts
from envgen.facts import load as load_module
from envgen.resolve import Request, count_feasible, engine, resolve

REQUESTS = [
    Request(framework="deepspeed", cuda="12.1"),
    Request(framework="megatron-core", cuda="12.1"),
    Request(framework="colossalai", cuda="12.1"),
    Request(framework="deepspeed", gpu_arch="sm_90", driver="535.104.05", python="3.11"),
    Request(framework="deepspeed"),
    Request(),
]


def cold() -> None:
    """Forget everything a fresh process would not know."""
    load_module._CACHE.clear()
    engine._NEG.clear()
    for fn in (versions.parse_version, versions.parse_spec, versions.spec_contains,
               versions.python_key, versions.dotted_key):
        fn.cache_clear()


def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--matrix-dir", default=None)
    ap.add_argument("--json", action="store_true", help="print results as JSON")
    args = ap.parse_args()
    matrix = find_matrix_dir(args.matrix_dir)
    facts = load_facts(matrix)

    def enumerate_all() -> int:
        return sum(count_feasible(Request(platform=p), facts)
                   for p in ("linux-x86_64", "linux-aarch64"))

    enum_s, total = timed(enumerate_all, args.repeat)
    results = {"matrix": str(matrix), "feasible_combinations": total,
               "enumerate_median_s": round(enum_s, 4), "single": [], "cli": []}

    for req in REQUESTS:
        def one(req=req):
            cold()
            return resolve(req, load_facts(matrix), limit=10)
        t, found = timed(one, args.repeat)
        results["single"].append({"request": req.flags() or "(none)",
                                  "median_ms": round(t * 1e3, 2), "top": found[0].id})

    def uncompiled():
        cold()
        os.environ["ENVGEN_FACTS_CACHE"] = "0"
        try:
            return resolve(REQUESTS[0], load_facts(matrix), limit=10)
        finally:
            del os.environ["ENVGEN_FACTS_CACHE"]
    t, _ = timed(uncompiled, args.repeat)
    results["first_after_change_ms"] = round(t * 1e3, 2)

    for req in REQUESTS[:3]:
        argv = [sys.executable, "-m", "envgen", "--matrix-dir", str(matrix), "resolve", "--json",
                *req.flags().split()]
        t, _ = timed(lambda argv=argv: subprocess.run(argv, check=True, capture_output=True),
                     max(3, args.repeat // 2))
        results["cli"].append({"request": req.flags(), "median_ms": round(t * 1e3, 1)})

    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return 0
    print(f"matrix: {matrix}")
    print(f"enumerate: {total:,} feasible combinations, median {enum_s * 1e3:.1f} ms "
          f"over {args.repeat} runs (target ≤ 1000 ms)")
    worst = max(r["median_ms"] for r in results["single"])
    print(f"single request incl. loading the snapshot (target ≤ 50 ms; worst {worst} ms):")
    for r in results["single"]:
        print(f"  {r['median_ms']:>8.2f} ms  {r['request']:<60} → {r['top']}")
    print(f"  {results['first_after_change_ms']:>8.2f} ms  {REQUESTS[0].flags():<60}   (first run "
          f"after the matrix changed: every file parsed and validated)")
    print("CLI subprocess wall time (Python start-up included):")
    for r in results["cli"]:
        print(f"  {r['median_ms']:>8.1f} ms  envgen resolve {r['request']}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    raise SystemExit(main())
