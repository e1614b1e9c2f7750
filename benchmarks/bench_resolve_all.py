"""Every combination of one framework as JSON: `envgen resolve --framework deepspeed --limit 0
--json` (issue 15 target: ≤ 6 s wall and ≤ 150 MB peak RSS on this 2-core machine).

The rows are streamed: ``envgen.resolve.iter_resolve`` builds one combination at a time and
each is written as one compact JSON line (the C encoder), in the document the CLI writes
(envgen/cli/render.py ``stream_json``)::

    {
    "request": {...},
    "why": [...],
    "combinations": [
    {...},
    {...}
    ],
    "torch_builds": [...]
    }

Each row is encoded either as the CLI does, ``JSONEncoder(ensure_ascii=False,
separators=(",", ":")).encode(c.to_dict())`` ("dumps"), or with ``c.to_json((",", ":"))``
(the same bytes, reusing the JSON of the fields consecutive rows share). Measured, each a
median over ``--repeat`` runs:

1. in-process: that writer (:func:`write_all`) called in this process (facts preloaded),
   output to /dev/null; wall and CPU time;
2. subprocess: the same writer through ``python -c`` (start-up, imports and loading the facts
   through the compiled copy included), its output read through a pipe as ``| wc -c`` would;
   wall time, CPU time (user + system), bytes and peak RSS of the child
   (``resource.getrusage(RUSAGE_CHILDREN)``, read in a fresh helper process per run); on a
   busy machine the CPU time is the steadier number;
3. cli: ``envgen resolve ... --limit 0 --json`` itself, when ``--cli`` is given.

Run: ``python benchmarks/bench_resolve_all.py [--repeat N] [--framework NAME] [--cli]``.
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
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
TARGET_S, TARGET_MB = 6.0, 150.0
COMPACT = (",", ":")


def write_all(framework: str, out: TextIO, matrix_dir: str | None = None,
              rows_as: str = "dumps") -> int:
    """Write every combination for ``--framework`` the way the CLI does (envgen/cli/render.py
    ``stream_json``: compact separators, one row per line); the row count. ``rows_as``:
    "dumps" (the CLI's encoder on ``c.to_dict()``) or "to_json" (``c.to_json(COMPACT)``,
    the same bytes)."""
    from envgen.facts import find_matrix_dir, load_facts
    from envgen.resolve import Request, decisions, iter_resolve, torch_verdicts
    from envgen.resolve.request import validate

    facts = load_facts(find_matrix_dir(matrix_dir))
    request = Request(framework=framework)
    rows = iter(iter_resolve(request, facts, limit=None))
    best = next(rows)
    checked = validate(request, facts)
    encode = json.JSONEncoder(ensure_ascii=False, separators=COMPACT).encode
    why = [d.to_dict() for d in decisions(checked, facts, best)]
    write = out.write
    write('{\n"request": ' + encode(checked.given()) + ',\n"why": ' + encode(why)
          + ',\n"combinations": [')
    n = 0
    if rows_as == "to_json":
        write("\n" + best.to_json(COMPACT))
        for c in rows:
            write(",\n")
            write(c.to_json(COMPACT))
            n += 1
    else:
        write("\n" + encode(best.to_dict()))
        for c in rows:
            write(",\n")
            write(encode(c.to_dict()))
            n += 1
    write('\n],\n"torch_builds": ' + encode(torch_verdicts(checked, facts)) + "\n}\n")
    return n + 1


class _Counter:
    """A text sink that only counts what is written (UTF-8 bytes)."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        return len(text)


# measures one child: wall, its peak RSS (ru_maxrss of the only child of this helper), bytes
_CHILD = """
import resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
n = 0
while chunk := p.stdout.read(1 << 20):  # what `| wc -c` does
    n += len(chunk)
assert p.wait() == 0
wall = time.perf_counter() - t
use = resource.getrusage(resource.RUSAGE_CHILDREN)
print(wall, use.ru_maxrss / 1024, n, use.ru_utime + use.ru_stime)
"""


def _child(argv: list[str]) -> tuple[float, float, int, float]:
    """(wall s, peak RSS MB, stdout bytes, CPU s) of ``argv`` run in a fresh helper process."""
    got = subprocess.run([sys.executable, "-c", _CHILD, *argv], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout.split()
    return float(got[0]), float(got[1]), int(got[2]), float(got[3])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--framework", default="deepspeed")
    ap.add_argument("--matrix-dir", default=None)
    ap.add_argument("--rows", choices=("dumps", "to_json", "both"), default="both",
                    help="row encoding: json.dumps(c.to_dict()) (the CLI's), c.to_json(), both")
    ap.add_argument("--cli", action="store_true", help="also time `envgen resolve` itself")
    ap.add_argument("--json", action="store_true", help="print results as JSON")
    args = ap.parse_args()
    results: dict = {"framework": args.framework, "target_s": TARGET_S, "target_mb": TARGET_MB}
    kinds = ("dumps", "to_json") if args.rows == "both" else (args.rows,)

    sink = _Counter()
    results["rows"] = write_all(args.framework, sink, args.matrix_dir)  # warms the cache too
    results["bytes"] = sink.bytes
    for kind in kinds:
        times, cpu = [], []
        for _ in range(args.repeat):
            with open(os.devnull, "w", encoding="utf-8") as null:
                t, c = time.perf_counter(), time.process_time()
                write_all(args.framework, null, args.matrix_dir, kind)
                times.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
        results[f"in_process_{kind}"] = {"median_s": round(statistics.median(times), 3),
                                         "cpu_s": round(statistics.median(cpu), 3)}
        code = ("import sys; sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r}); "
                "from bench_resolve_all import write_all; "
                "write_all({fw!r}, sys.stdout, {md!r}, {kind!r})").format(
            root=str(ROOT), bench=str(ROOT / "benchmarks"), fw=args.framework,
            md=args.matrix_dir, kind=kind)
        runs = [_child([sys.executable, "-c", code]) for _ in range(args.repeat)]
        results[f"subprocess_{kind}"] = _summary(runs)
    if args.cli:
        argv = [sys.executable, "-m", "envgen", *(["--matrix-dir", args.matrix_dir]
                                                  if args.matrix_dir else []),
                "resolve", "--framework", args.framework, "--limit", "0", "--json"]
        results["cli"] = _summary([_child(argv) for _ in range(args.repeat)])

    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return 0
    print(f"every {args.framework} combination as JSON: {results['rows']:,} rows, "
          f"{results['bytes'] / 1e6:.1f} MB; medians of {args.repeat} "
          f"(targets: {TARGET_S:.0f} s, {TARGET_MB:.0f} MB peak)")
    for name, r in results.items():
        if name.startswith("in_process"):
            print(f"  {name:<22} {r['median_s']:7.2f} s wall, {r['cpu_s']:.2f} s CPU "
                  f"(facts preloaded)")
        elif name.startswith(("subprocess", "cli")):
            print(f"  {name:<22} {r['median_s']:7.2f} s wall ({r['median_s'] / TARGET_S:.2f} "
                  f"of target), {r['cpu_s']:.2f} s CPU  peak RSS {r['peak_mb']:6.1f} MB "
                  f"({r['peak_mb'] / TARGET_MB:.2f} of target)  {r['bytes'] / 1e6:.1f} MB out")
    return 0


def _summary(runs: list[tuple[float, float, int, float]]) -> dict:
    return {"median_s": round(statistics.median(r[0] for r in runs), 3),
            "peak_mb": round(max(r[1] for r in runs), 1), "bytes": runs[-1][2],
            "cpu_s": round(statistics.median(r[3] for r in runs), 3)}


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
