"""Image build benchmark: cold build, unchanged rebuild, rebuild after changing only the
framework version, and builder vs runtime size, for one combination (needs dockerd and the
network: PyPI and the OS mirror).

    python benchmarks/bench_image.py \
        --combination deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64 \
        --other-version 0.19.7 --cold -- --flavor venv --gpu-arch sm_90 --base local/debian:bookworm

Options after `--` go to `envgen make`. `--ca-cert` is passed to `envgen build` (a proxy's CA).
`--cold` makes the first build --no-cache: every step runs, from the base image on.
Targets (README "Benchmarks"): unchanged rebuild ≤ 2 s; runtime image ≤ 40% of the builder.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def envgen(*args: str) -> dict:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "envgen", *args, "--json"], text=True,
                          stdout=subprocess.PIPE)
    if proc.returncode != 0:
        sys.exit(f"envgen {' '.join(args)} failed ({proc.returncode})")
    out = json.loads(proc.stdout)
    out["wall"] = time.monotonic() - started
    return out


def make(out: Path, combination: str, make_args: list[str]) -> str:
    return envgen("make", "--combination", combination, "--image", "--out", str(out),
                  *make_args)["directory"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--combination", required=True)
    p.add_argument("--other-version", required=True,
                   help="the framework version to switch to for the 'framework changed' rebuild")
    p.add_argument("--ca-cert", action="append", default=[])
    p.add_argument("--build-arg", action="append", default=[])
    p.add_argument("--cold", action="store_true")
    p.add_argument("make_args", nargs="*")
    args = p.parse_args()
    build_opts = [x for c in args.ca_cert for x in ("--ca-cert", c)]
    build_opts += [x for b in args.build_arg for x in ("--build-arg", b)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="envgen-bench-image-") as tmp:
        first = make(Path(tmp) / "a", args.combination, args.make_args)
        r = envgen("build", first, *build_opts, *(["--no-cache"] if args.cold else []))
        rows.append(("first build" + (" (cold)" if args.cold else ""), r))
        r = envgen("build", first, *build_opts)
        rows.append(("unchanged rebuild (skipped by build hash)", r))
        r = envgen("build", first, *build_opts, "--force")
        rows.append(("unchanged rebuild, --force (layer cache)", r))
        fw, version = args.combination.split("-")[0], args.combination.split("-")[1]
        if args.combination.startswith("megatron-core-"):
            fw, version = "megatron-core", args.combination.split("-")[2]
        other = args.combination.replace(f"{fw}-{version}-", f"{fw}-{args.other_version}-", 1)
        second = make(Path(tmp) / "b", other, args.make_args)
        same = (Path(first) / "image/base.lock.txt").read_bytes() == (
            Path(second) / "image/base.lock.txt").read_bytes()
        r = envgen("build", second, *build_opts)
        rows.append((f"framework {version} → {args.other_version} (base layer "
                     f"{'reused' if same else 'CHANGED'})", r))
        builder = envgen("build", first, *build_opts, "--target", "builder")
        rows.append(("builder stage", builder))
    runtime = rows[0][1]
    print(f"{'step':58} {'wall s':>8} {'size GB':>8}")
    for label, r in rows:
        size = f"{r['size'] / 1e9:8.2f}" if r.get("size") else " " * 8
        print(f"{label:58} {r['wall']:8.1f} {size}")
    if runtime.get("size") and builder.get("size"):
        print(f"runtime / builder size: {runtime['size'] / builder['size']:.0%} (target ≤ 40%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
