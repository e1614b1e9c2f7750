"""Score `envgen doctor --report` on the corpus of real bug reports (tests/doctor/corpus).

Usage:
    python benchmarks/doctor_corpus.py                 # both sets
    python benchmarks/doctor_corpus.py --set dev       # one set
    python benchmarks/doctor_corpus.py --set dev --json

Each report runs as a subprocess: `python -m envgen doctor --report FILE --json`, with
`--framework NAME` when the report comes from that framework's own tracker (TRACKERS: a
maintainer triaging their tracker knows which framework the report is about, as the reporter
does; the text alone often never names it).
Per report the outcome is one of
    named       an expected kind is an error/warning finding
    asked       no expected kind named, but a need asks for a fact that decides an expected kind
    missed      expected kinds given, neither named nor asked
    no-kind     the doctor has no kind for the cause (expected = []): not counted above
    good        a known-good report (the environment was fine)
and separately
    false alarm an error finding on a good report, or an error finding whose kind is neither
                expected nor in `also_true` (true per the thread)
    exit-2      the doctor recognised no environment facts (exit status 2)
    crash       an internal error or a traceback (never acceptable)
A frozen report marked `seen` in corpus.toml (its text was seen while the doctor was tuned) is
scored with the rest, and the frozen score is printed once more without those ("never seen").
Reads only local files; no network.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = ROOT / "tests" / "doctor" / "corpus"
CORPUS = CORPUS_DIR / "corpus.toml"

# The split rule (stated in corpus.toml's header): frozen iff the first 8 hex digits of
# sha256(url) as an integer are below FROZEN_BELOW (45% of 2**32).
FROZEN_BELOW = 0x73333333

# Which needed facts decide each finding kind (for "asked").
DECIDING_FACTS: dict[str, set[str]] = {
    "cuda_major_mismatch": {"nvcc", "torch_cuda"},
    "cuda_minor_mismatch": {"nvcc", "torch_cuda"},
    "nvcc_missing": {"nvcc"},
    "host_compiler_too_new": {"gcc", "nvcc"},
    "host_compiler_too_old": {"gcc"},
    "cxx_standard_mismatch": {"gcc", "torch"},
    "libaio_missing": {"libaio"},
    "ninja_missing": {"ninja"},
    "unsupported_platform": {"os", "platform"},
    "gpu_arch_unsupported": {"gpu", "torch", "torch_cuda"},
    "driver_too_old": {"driver", "torch_cuda"},
    "torch_unsupported_by_framework": {"torch"},
    "python_unsupported": {"python"},
    "glibc_too_old": {"glibc"},
    "nccl_mismatch": {"nccl"},
    "abi_mismatch": {"torch"},
    "dependency_conflict": {"pip"},
    "cuda_home_mismatch": {"nvcc", "cuda_home"},
    "stale_extension_cache": {"torch"},
    "import_failed": {"torch"},
    "libstdcxx_too_old": {"gcc"},
    "torch_api_removed": {"torch"},
    "shm_too_small": set(),
    "linux_only_op": {"os", "platform"},
    "extension_built_for_other_torch": {"torch"},
    "apex_cuda_ext_missing": set(),
    "python_headers_missing": {"python"},
    "torch_cpu_only": {"torch", "torch_cuda", "gpu"},
}


def expected_set(url: str) -> str:
    """The set a report belongs to, from its URL alone (decided before any scoring)."""
    head = int(hashlib.sha256(url.encode()).hexdigest()[:8], 16)
    return "frozen" if head < FROZEN_BELOW else "dev"


def load_corpus(path: Path = CORPUS) -> dict:
    with path.open("rb") as fh:
        return tomllib.load(fh)


# a framework's own issue tracker → the framework (`envgen doctor --framework`)
TRACKERS = {"deepspeedai/DeepSpeed": "deepspeed", "microsoft/DeepSpeed": "deepspeed",
            "hpcaitech/ColossalAI": "colossalai", "NVIDIA/Megatron-LM": "megatron-core"}


def run_one(report: dict, timeout: float = 30.0) -> dict:
    """Run the doctor on one report; return its raw result (rc, json, stderr, seconds)."""
    file = CORPUS_DIR / "reports" / report["file"]
    cmd = [sys.executable, "-m", "envgen", "doctor", "--report", str(file), "--json"]
    framework = TRACKERS.get(report.get("repository", ""))
    if framework:
        cmd += ["--framework", framework]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    seconds = time.perf_counter() - start
    try:
        out = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except json.JSONDecodeError:
        out = {}
    return {"rc": proc.returncode, "out": out, "stderr": proc.stderr, "seconds": seconds}


def judge(report: dict, raw: dict) -> dict:
    """Outcome of one report (see the module docstring)."""
    out = raw["out"]
    findings = out.get("findings", []) if isinstance(out, dict) else []
    needs = out.get("needs", []) if isinstance(out, dict) else []
    expected = set(report.get("expected", []))
    also_true = set(report.get("also_true", []))
    good = bool(report.get("good", False))
    raised = {f["kind"] for f in findings if f.get("severity") in ("error", "warning")}
    errors = {f["kind"] for f in findings if f.get("severity") == "error"}
    asked_facts = {n.get("fact") for n in needs}
    crash = "Traceback" in raw["stderr"] or "internal error" in raw["stderr"] or (
        isinstance(out, dict) and "internal error" in str(out.get("error", {}).get("message", ""))
    )
    if good:
        outcome = "good"
    elif not expected:
        outcome = "no-kind"
    elif expected & raised:
        outcome = "named"
    elif any(asked_facts & DECIDING_FACTS.get(k, set()) for k in expected):
        outcome = "asked"
    else:
        outcome = "missed"
    false_alarms = sorted(errors) if good else sorted(errors - expected - also_true)
    return {
        "file": report["file"],
        "class": report.get("class", ""),
        "outcome": outcome,
        "false_alarms": false_alarms,
        "exit2": raw["rc"] == 2,
        "crash": crash,
        "rc": raw["rc"],
        "seconds": raw["seconds"],
        "kinds": sorted(raised),
        "needs": sorted(f for f in asked_facts if f),
        # what the doctor tells the user to run (tests/doctor/test_corpus.py checks each)
        "commands": [f["command"] for f in findings if f.get("command")],
        "platform": (out.get("snapshot") or {}).get("platform") if isinstance(out, dict) else None,
    }


def score(reports: list[dict], workers: int = 2) -> list[dict]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        raws = list(pool.map(run_one, reports))
    return [judge(r, raw) for r, raw in zip(reports, raws, strict=True)]


def summarise(results: list[dict]) -> dict:
    def count(rs: list[dict]) -> dict:
        secs = [r["seconds"] for r in rs] or [0.0]
        return {
            "reports": len(rs),
            "named": sum(r["outcome"] == "named" for r in rs),
            "asked": sum(r["outcome"] == "asked" for r in rs),
            "missed": sum(r["outcome"] == "missed" for r in rs),
            "no_kind": sum(r["outcome"] == "no-kind" for r in rs),
            "good": sum(r["outcome"] == "good" for r in rs),
            "false_alarm": sum(bool(r["false_alarms"]) for r in rs),
            "exit2": sum(r["exit2"] for r in rs),
            "crash": sum(r["crash"] for r in rs),
            "median_s": round(statistics.median(secs), 3),
            "max_s": round(max(secs), 3),
        }

    by_class: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        by_class[r["class"]].append(r)
    classes = {c: count(rs) for c, rs in sorted(by_class.items())}
    return {"total": count(results), "classes": classes}


COLUMNS = (
    "reports", "named", "asked", "missed", "no_kind", "good", "false_alarm", "exit2", "crash",
)


def print_table(name: str, summary: dict) -> None:
    print(f"== {name} ==")
    head = f"{'class':32}" + "".join(f"{c:>12}" for c in COLUMNS)
    print(head)
    for cls, row in summary["classes"].items():
        print(f"{cls:32}" + "".join(f"{row[c]:>12}" for c in COLUMNS))
    tot = summary["total"]
    print(f"{'TOTAL':32}" + "".join(f"{tot[c]:>12}" for c in COLUMNS))
    print(f"seconds per report: median {tot['median_s']}, max {tot['max_s']}")
    print()


def print_score(name: str, tot: dict) -> None:
    """One line: named / asked / missed of the reports that have an expected kind."""
    counted = tot["named"] + tot["asked"] + tot["missed"]
    share = f"{100 * (tot['named'] + tot['asked']) / counted:.0f}%" if counted else "-"
    print(f"{name}: named {tot['named']}, asked {tot['asked']}, missed {tot['missed']} of "
          f"{counted} ({share} named or asked); false alarms {tot['false_alarm']}, exit 2 "
          f"{tot['exit2']}, of {tot['reports']} reports")
    print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--set", choices=("dev", "frozen", "all"), default="all")
    ap.add_argument("--json", action="store_true", help="per-report results and summaries as JSON")
    ap.add_argument(
        "--workers", type=int, default=2, help="reports run in parallel (timings grow with more)"
    )
    args = ap.parse_args(argv)
    corpus = load_corpus()
    sets = ("dev", "frozen") if args.set == "all" else (args.set,)
    dump: dict = {}
    for s in sets:
        reports = [r for r in corpus["report"] if r["set"] == s]
        results = score(reports, workers=args.workers)
        summary = summarise(results)
        dump[s] = {"summary": summary, "results": results}
        seen = {r["file"] for r in reports if r.get("seen")}
        if seen:  # frozen reports whose text was seen while tuning (corpus.toml `seen`)
            dump[s]["never_seen"] = summarise([r for r in results if r["file"] not in seen])
        if not args.json:
            print_table(s, summary)
            if seen:
                print_score(f"{s}, never seen ({len(seen)} seen left out)",
                            dump[s]["never_seen"]["total"])
    if args.json:
        print(json.dumps(dump, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
