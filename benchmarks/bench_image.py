"""Image build benchmark: cold build, warm rebuild (ccache), no-op rebuild, the ops step with 1
vs 2 (…) compile jobs and each op's compile time, and the runtime / builder / env sizes, for
one combination, with the BuildKit engine (its ccache mount is what a warm rebuild reuses) or,
with `--engine sdk`, the daemon's classic builder (envgen's ccache store is what it reuses).
Needs dockerd, the docker CLI and the network (PyPI and the OS mirror).

    python benchmarks/bench_image.py \\
        --combination deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64 \\
        --jobs 2 --jobs 1 --serial -- --flavor venv --gpu-arch sm_90 --base local/debian:bookworm

Options after `--` go to `envgen make`; `--ca-cert` goes to `envgen build` (a proxy's CA, as
the build secret). What each row is:
- cold: `envgen build --no-cache` with the ccache mount emptied first (every step runs; pip's
  cache mount is kept, so wheels already downloaded are not downloaded again);
- warm (ccache): the same build with only the ops step invalidated (MAX_JOBS given as "0<N>",
  the same N jobs spelt differently: torch reads it with int()), so it recompiles every op
  against a warm ccache;
- ops, N jobs: the builder stage with only its ops step re-run, ccache emptied first,
  MAX_JOBS=N (the first --jobs is the cold build's own ops step);
- serial (--serial): the same, with the recipe of before parallel op builds (DeepSpeed
  without DS_ENABLE_NINJA: one compiler at a time, whatever MAX_JOBS says);
- no-op: `envgen build` again: the content tag is found, nothing is built.
Each op's time is read from BuildKit's timestamps on setuptools' "building '…' extension" lines
(the classic builder's log has none: with --engine sdk only the ops step's time is shown, from
envgen's own step log). With --engine sdk "ccache empty" means the store's directory emptied;
--ca-cert needs BuildKit, so behind a TLS proxy give --engine sdk a base that trusts its CA.
Targets (README "Benchmarks"): ops step with 2 jobs ≤ 0.55× serial; warm ≤ 10% of cold.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOCKER = shutil.which("docker") or "docker"  # --docker-cli: one with BuildKit (docker build)
_LINE = re.compile(r"#(\d+) (\d+\.\d+) (.*)$")
_DONE = re.compile(r"#(\d+) DONE (\d+\.\d+)s")
_OP = re.compile(r"building '([\w.]+)' extension")
_AFTER_OPS = re.compile(r"running install|installing to build|Created wheel")


LOGS: Path | None = None  # --log-dir: each command's log is kept there


def envgen(*args: str) -> tuple[dict, list[str]]:
    """Run `envgen ARGS -v --json`; (its JSON, its log lines)."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "envgen", *args, "-v", "--json"], text=True,
                          capture_output=True)
    if LOGS is not None:
        LOGS.mkdir(parents=True, exist_ok=True)
        n = len(list(LOGS.iterdir())) + 1
        (LOGS / f"{n:02}-{args[0]}.log").write_text(
            " ".join(args) + "\n" + proc.stderr + proc.stdout, encoding="utf-8")
    if proc.returncode != 0:
        sys.exit(f"envgen {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout)
    out["wall"] = time.monotonic() - started
    return out, proc.stderr.splitlines()


def ops_step(lines: list[str]) -> dict:
    """The ops step's duration and each op's compile time, from BuildKit's plain log."""
    if ENGINE == "sdk":
        return ops_step_classic(lines)
    step = None  # the vertex whose output compiles the ops
    for line in lines:
        m = _LINE.search(line)
        if m and _OP.search(m.group(3)):
            step = m.group(1)
            break
    if step is None:
        return {}
    marks, done = [], None
    for line in lines:
        m = _LINE.search(line)
        if m and m.group(1) == step:
            t, text = float(m.group(2)), m.group(3)
            op = _OP.search(text)
            if op:
                marks.append((t, op.group(1).rsplit(".", 1)[-1].removesuffix("_op")))
            elif marks and marks[-1][1] != "" and _AFTER_OPS.search(text):
                marks.append((t, ""))
        d = _DONE.search(line)
        if d and d.group(1) == step:
            done = float(d.group(2))
    per_op: dict[str, float] = {}
    if not marks:
        return {"seconds": done, "per_op": per_op}
    for (t, op), (t_next, _) in zip(marks, [*marks[1:], (done or 0.0, "")], strict=True):
        if op:
            per_op[op] = round(t_next - t, 1)
    return {"seconds": done, "per_op": per_op}


def cache_mounts(target: str) -> list[str]:
    """Ids of BuildKit cache mounts at ``target`` (from the daemon's disk usage)."""
    out = subprocess.run([DOCKER, "system", "df", "-v", "--format", "{{json .BuildCache}}"],
                         capture_output=True, text=True, check=True).stdout
    return [c["ID"] for c in json.loads(out or "[]")
            if c.get("CacheType") == "exec.cachemount"
            and f"cached mount {target} " in (c.get("Description") or "")]


ENGINE = "buildkit"
_COMPACT_STEP = re.compile(r"^\[\s*\d+/\d+\] RUN .*(pip install --verbose|DS_ACCELERATOR)")
_COMPACT_DONE = re.compile(r"^  done in (\d+\.\d+) s")


def ops_step_classic(lines: list[str]) -> dict:
    """The ops step's duration from envgen's compact step log (the classic builder's own
    log has no timestamps): the first ops RUN step that ran, to its "done in"."""
    in_step = False
    for line in lines:
        if _COMPACT_STEP.match(line):
            in_step = True
        elif in_step and (m := _COMPACT_DONE.match(line)):
            return {"seconds": float(m.group(1)), "per_op": {}}
    return {}


def empty_ccache() -> None:
    if ENGINE == "sdk":
        from envgen.image.ccache_store import cache_dir

        shutil.rmtree(cache_dir() / "objects", ignore_errors=True)
        return
    for cache_id in cache_mounts("/root/.cache/ccache"):
        subprocess.run([DOCKER, "builder", "prune", "-f", "--filter", f"id={cache_id}"],
                       capture_output=True, check=True)


def make(out: Path, combination: str, make_args: list[str], matrix: Path | None = None) -> str:
    extra = ["--matrix-dir", str(matrix)] if matrix else []
    made, _ = envgen("make", "--combination", combination, "--image", "--out", str(out),
                     *extra, *make_args)
    return made["directory"]


def serial_matrix(tmp: Path) -> Path:
    """A copy of matrix/ whose op recipe is the one before parallel builds (no ninja)."""
    root = Path(__file__).resolve().parent.parent / "matrix"
    copy = tmp / "matrix-serial"
    shutil.copytree(root, copy)
    images = copy / "curated" / "images.toml"
    text = images.read_text(encoding="utf-8")
    images.write_text(text.replace('DS_ENABLE_NINJA = "1", ', ""), encoding="utf-8")
    return copy


def size(ref: str) -> int:
    return int(subprocess.run([DOCKER, "image", "inspect", ref, "--format", "{{.Size}}"],
                              capture_output=True, text=True, check=True).stdout)


def env_size(ref: str) -> int:
    out = subprocess.run([DOCKER, "run", "--rm", ref, "du", "-sb", "/opt/env"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def main() -> int:
    global DOCKER, LOGS, ENGINE
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--combination", required=True)
    p.add_argument("--jobs", action="append", type=int, default=[],
                   help="MAX_JOBS values to time the ops step with (repeatable; default 2 1)")
    p.add_argument("--serial", action="store_true",
                   help="also time the ops step as built before (DeepSpeed without ninja)")
    p.add_argument("--build-arg", action="append", default=[])
    p.add_argument("--ca-cert", action="append", default=[],
                   help="a TLS-intercepting proxy's CA, for envgen build (repeatable)")
    p.add_argument("--log-dir", type=Path, help="keep every command's log here")
    p.add_argument("--docker-cli", default=DOCKER,
                   help="the docker CLI whose `docker build` is BuildKit (default: docker)")
    p.add_argument("--engine", choices=("buildkit", "sdk"), default="buildkit",
                   help="sdk: the classic builder, with envgen's ccache store")
    p.add_argument("make_args", nargs="*")
    args = p.parse_args()
    DOCKER, LOGS, ENGINE = args.docker_cli, args.log_dir, args.engine
    jobs = args.jobs or [2, 1]
    common = ["--engine", ENGINE] + (["--docker-cli", DOCKER] if ENGINE == "buildkit" else [])
    common += [x for b in args.build_arg for x in ("--build-arg", b)]
    common += [x for c in args.ca_cert for x in ("--ca-cert", c)]
    rows: list[tuple[str, float, dict]] = []
    with tempfile.TemporaryDirectory(prefix="envgen-bench-image-") as tmp:
        lock = make(Path(tmp) / "a", args.combination, args.make_args)
        empty_ccache()
        cold, log = envgen("build", lock, *common, "--no-cache",
                           "--build-arg", f"MAX_JOBS={jobs[0]}")
        rows.append((f"cold (--no-cache, ccache empty, {jobs[0]} jobs)", cold["wall"],
                     ops_step(log)))
        warm, log = envgen("build", lock, *common, "--force", "--build-arg",
                           f"MAX_JOBS=0{jobs[0]}")
        rows.append((f"warm (ops step again, ccache warm, {jobs[0]} jobs)", warm["wall"],
                     ops_step(log)))
        for n in jobs[1:]:  # the builder stage alone: the ops step is what changes
            empty_ccache()
            r, log = envgen("build", lock, *common, "--target", "builder", "--force",
                            "--build-arg", f"MAX_JOBS={n}")
            rows.append((f"ops step, {n} job(s), ccache empty", r["wall"], ops_step(log)))
        if args.serial:
            serial = make(Path(tmp) / "serial", args.combination, args.make_args,
                          serial_matrix(Path(tmp)))
            empty_ccache()
            r, log = envgen("build", serial, *common, "--target", "builder", "--force",
                            "--build-arg", f"MAX_JOBS={jobs[0]}")
            rows.append(("ops step as before (no ninja: serial), ccache empty", r["wall"],
                         ops_step(log)))
        noop, _ = envgen("build", lock, *common)
        rows.append(("no-op rebuild (content tag found)", noop["wall"], {}))
        runtime = cold["references"][0]
        sizes = {"runtime": size(runtime), "builder": size(f"{runtime}-builder"),
                 "env": env_size(runtime)}
    ops_names = sorted({op for _, _, s in rows for op in s.get("per_op", {})})
    print(f"{'build':58} {'wall s':>8} {'ops s':>7}  " + " ".join(f"{o[:12]:>12}"
                                                             for o in ops_names))
    for label, wall, step in rows:
        per = step.get("per_op", {})
        ops_s = f"{step['seconds']:7.1f}" if step.get("seconds") else " " * 7
        print(f"{label:58} {wall:8.1f} {ops_s}  "
              + " ".join(f"{per[o]:12.1f}" if o in per else " " * 12 for o in ops_names))
    by = {label: step.get("seconds") for label, _, step in rows}
    first = rows[0][2].get("seconds")  # the cold build's ops step
    for n in jobs[1:]:
        other = by.get(f"ops step, {n} job(s), ccache empty")
        if first and other:
            print(f"ops step, {jobs[0]} vs {n} job(s): {first / other:.2f}×")
    serial_s = by.get("ops step as before (no ninja: serial), ccache empty")
    if first and serial_s:
        print(f"ops step, {jobs[0]} jobs / serial: {first / serial_s:.2f} (target ≤ 0.55)")
    cold_s = rows[0][2].get("seconds")
    warm_s = rows[1][2].get("seconds")
    if cold_s and warm_s:
        print(f"ops step warm / cold: {warm_s / cold_s:.0%} (target ≤ 10%); whole build "
              f"{rows[1][1]:.1f} s / {rows[0][1]:.1f} s = {rows[1][1] / rows[0][1]:.0%}")
    for label, result in (("cold", cold), ("warm", warm)):
        c = result.get("ccache") or {}
        if "hits" in c:
            print(f"ccache store, {label}: {c['hits']} hits, {c['misses']} misses, "
                  f"{c['stored']} stored")
    print(f"sizes: runtime {sizes['runtime'] / 1e9:.2f} GB, builder {sizes['builder'] / 1e9:.2f} "
          f"GB, the locked env (/opt/env) {sizes['env'] / 1e9:.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
