"""Resolver benchmarks over the committed snapshot in matrix/.

1. enumerate: walk every feasible combination (all framework releases × torch builds × CUDA ×
   Python × OS, both platforms); report the count and the median time (snapshot preloaded).
2. single: load the snapshot from disk (all in-process caches cleared, as in a fresh process;
   the compiled copy in the user cache, envgen/facts/compiled.py, is used as a later run would)
   and answer one request (top 10); median per request. Also once without the compiled copy:
   the first run after the matrix changed, which parses and validates every file.
3. cli: wall time of `envgen resolve ...` as a subprocess (Python start-up included).
4. scaled (``--scale N``, default 10): a matrix with N times today's harvested data, made
   from the real one by copying every torch build and framework release with its version
   shifted (2.5.1 → 2.5.1.1 … 2.5.1.9: ranked above the original, still inside the
   releases' requirement ranges) and every CUDA toolkit with its major shifted (12.1 → 22.1
   …: no torch build uses them), written as valid matrix files to a temporary directory.
   Measured per request, all in-process caches cleared as in a fresh process: loading
   without the compiled copy (parse and validate every file), loading with it (hash the
   files' content, read the copy), one request (top 10) and, as the CLI does, what decided
   the best one (``envgen.resolve.decisions``). Issue 15's target: load + one request
   ≤ 50 ms at 10x.

Run: `python benchmarks/bench_resolve.py [--repeat N] [--matrix-dir DIR] [--scale N]` or
`nox -s bench`. Targets (2-core machine): enumerate ≤ 1 s, single ≤ 50 ms, single at 10x
data (compiled copy) ≤ 50 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
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


def _shift(version: str, k: int) -> str:
    """2.5.1 → 2.5.1.k (a PEP 440 release segment more; plain versions only)."""
    return f"{version}.{k}"


def scaled_matrix(matrix: Path, factor: int, out: Path) -> Path:
    """A copy of ``matrix`` with ``factor`` times its harvested torch builds, framework
    releases and CUDA toolkits (see the module docstring); curated files as they are."""
    dst = out / "matrix"
    shutil.copytree(matrix / "curated", dst / "curated")
    (dst / "harvested").mkdir(parents=True)
    for name in os.listdir(matrix / "harvested"):
        src = matrix / "harvested" / name
        doc = json.loads(src.read_text(encoding="utf-8"))
        if name == "torch.json":
            doc["builds"] += [{**b, "version": _shift(b["version"], k)}
                              for k in range(1, factor) for b in list(doc["builds"])]
        elif name == "frameworks.json":
            doc["releases"] += [{**r, "version": _shift(r["version"], k)}
                                for k in range(1, factor) for r in list(doc["releases"])]
        elif name == "cuda.json":
            def moved(t: dict, k: int) -> dict:
                major, minor = t["cuda"].split(".")
                return {**t, "cuda": f"{int(major) + 10 * k}.{minor}"}
            doc["toolkits"] += [moved(t, k) for k in range(1, factor)
                                for t in list(doc["toolkits"])]
        (dst / "harvested" / name).write_text(json.dumps(doc, indent=2, ensure_ascii=False)
                                              + "\n", encoding="utf-8")
    return dst


def scaled(matrix: Path, factor: int, repeat: int) -> dict:
    """Load + one request at ``factor`` times today's data (see the module docstring)."""
    from envgen.resolve import decisions
    from envgen.resolve.request import validate

    with tempfile.TemporaryDirectory(prefix="envgen-bench-") as tmp:
        big = scaled_matrix(matrix, factor, Path(tmp))
        size = sum(f.stat().st_size for f in big.rglob("*") if f.is_file())
        os.environ["ENVGEN_FACTS_CACHE"] = "0"
        try:
            cold()
            parse_s, facts = timed(lambda: (cold(), load_facts(big))[1], max(1, repeat // 2))
        finally:
            del os.environ["ENVGEN_FACTS_CACHE"]
        out: dict = {"factor": factor, "bytes": size, "torch_builds": len(facts.torch_builds),
                     "framework_releases": len(facts.frameworks),
                     "toolkits": len(facts.toolkits), "parse_validate_ms": round(parse_s * 1e3, 1),
                     "requests": []}
        cold()
        load_facts(big)  # writes the compiled copy
        for req in REQUESTS:
            def load():
                cold()
                return load_facts(big)

            def one(req=req):
                facts = load()
                t0 = time.perf_counter()
                found = resolve(req, facts, limit=10)
                t1 = time.perf_counter()
                decisions(validate(req, facts), facts, found[0])
                t2 = time.perf_counter()
                return t0, t1, t2

            loads, resolves, whys, totals, cpus = [], [], [], [], []
            for _ in range(repeat):
                start, cpu = time.perf_counter(), time.process_time()
                t0, t1, t2 = one()
                cpus.append(time.process_time() - cpu)
                loads.append(t0 - start)
                resolves.append(t1 - t0)
                whys.append(t2 - t1)
                totals.append(t1 - start)
            out["requests"].append({
                "request": req.flags() or "(none)",
                "load_ms": round(statistics.median(loads) * 1e3, 2),
                "resolve_ms": round(statistics.median(resolves) * 1e3, 2),
                "load_and_resolve_ms": round(statistics.median(totals) * 1e3, 2),
                "decisions_ms": round(statistics.median(whys) * 1e3, 2),
                "cpu_all_ms": round(statistics.median(cpus) * 1e3, 2)})
        from envgen.facts import compiled

        files = [(f.name, f) for f in sorted(big.glob("harvested/*.json"))
                 + sorted(big.glob("curated/*.toml"))]
        hash_s, _ = timed(lambda: compiled.key(files), repeat)
        out["hash_ms"] = round(hash_s * 1e3, 2)  # stats only: the hashes are remembered
        remembered = compiled._read_memo
        compiled._read_memo = dict  # as if nothing were remembered: every file read, hashed
        try:
            hash_s, _ = timed(lambda: compiled.key(files), repeat)
        finally:
            compiled._read_memo = remembered
        out["hash_all_ms"] = round(hash_s * 1e3, 2)
    return out


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
    ap.add_argument("--scale", type=int, default=10,
                    help="the data factor of the scaled run (0: skip it)")
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

    if args.scale:
        results["scaled"] = scaled(matrix, args.scale, args.repeat)

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
    if "scaled" in results:
        s = results["scaled"]
        worst = max(r["load_and_resolve_ms"] for r in s["requests"])
        print(f"{s['factor']}x data ({s['bytes'] / 1e6:.1f} MB: {s['torch_builds']} torch builds, "
              f"{s['framework_releases']} framework releases, {s['toolkits']} toolkits); "
              f"target load + request ≤ 50 ms, worst {worst} ms ({worst / 50:.2f} of target):")
        print(f"  {s['parse_validate_ms']:>8.1f} ms  load without the compiled copy (parse and "
              f"validate every file)")
        print(f"  {s['hash_ms']:>8.2f} ms  the compiled copy's key (part of every load: a stat per "
              f"file, hashes remembered); {s['hash_all_ms']:.2f} ms reading and hashing all "
              f"{s['bytes'] / 1e6:.0f} MB (after a change)")
        print(f"  {'load':>8}  {'request':>8}  {'total':>8}  {'why':>8}  {'CPU all':>8}   "
              f"(ms, medians; total = load + request; CPU all: CPU time of load + request + "
              f"why)")
        for r in s["requests"]:
            print(f"  {r['load_ms']:>8.2f}  {r['resolve_ms']:>8.2f}  "
                  f"{r['load_and_resolve_ms']:>8.2f}  {r['decisions_ms']:>8.2f}  "
                  f"{r['cpu_all_ms']:>8.2f}   {r['request']}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    raise SystemExit(main())
