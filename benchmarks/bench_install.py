"""`envgen install` of a lock against a bare `uv pip sync` of the same requirements into a fresh
venv: median of N (default 3) per side, run in turn, the same warm uv cache, the same
interpreter. envgen's extra work is checking the lock's hashes, choosing the interpreter,
installing the build dependencies first and writing the env's toolchain settings.

    python benchmarks/bench_install.py                 # the README's lock (PyPI; ~3 GB once)
    python benchmarks/bench_install.py --lock DIR --repeat 5

Target (issue 36): envgen ≤ 1.15× uv.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import envgen_command, installed_env, paired_ms

TARGET = 1.15


def _run(cmd: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")


def _readme_lock(out: Path, env: dict[str, str]) -> Path:
    _run([*envgen_command(), "make", "--framework", "deepspeed", "--flavor", "venv", "--out",
          str(out), "-q"], env)
    (lock,) = out.iterdir()
    return lock


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lock", type=Path, help="a lock directory (default: the README's)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cache-dir", type=Path,
                        help="the package cache both sides use (default: envgen's, "
                        "$ENVGEN_CACHE_DIR or ~/.cache/envgen)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from envgen.config import cache_root
    from envgen.lock import envs, read_manifest
    from envgen.lock.pip_compile import uv_binary

    work = Path(tempfile.mkdtemp(prefix="envgen-bench-install-"))
    env = installed_env()
    cache = args.cache_dir or cache_root()
    env["ENVGEN_CACHE_DIR"] = str(cache)
    lock = args.lock or _readme_lock(work / "locks", env)
    manifest = read_manifest(lock)
    python = envs.choose_python(manifest.target.python)
    uv = uv_binary()
    build = lock / "build-requirements.lock.txt"
    count = {"n": 0}

    def envgen() -> None:
        count["n"] += 1
        prefix = work / f"envgen-{count['n']}"
        _run([*envgen_command(), "install", str(lock), "--prefix", str(prefix), "--python",
              python, "--cache-dir", str(cache), "-q"], env)
        shutil.rmtree(prefix)

    def bare_uv() -> None:
        count["n"] += 1
        prefix = work / f"uv-{count['n']}"
        common = ["--python", str(prefix / "bin" / "python"), "--cache-dir", str(cache / "uv"),
                  "--require-hashes", "--no-config"]
        _run([uv, "venv", "--seed", "--no-config", "--python", python, str(prefix), "-q"], env)
        if build.exists():
            _run([uv, "pip", "install", "--no-deps", *common, "-r", str(build), "-q"], env)
        _run([uv, "pip", "sync", *common, *(["--no-build-isolation"] if build.exists() else []),
              str(lock / "requirements.lock.txt"), "-q"], env)
        shutil.rmtree(prefix)

    print(f"lock {lock.name}: warming the uv cache (one install of each)", flush=True)
    envgen()
    bare_uv()
    ms = paired_ms({"envgen install": envgen, "uv pip sync": bare_uv}, args.repeat)
    ratio = ms["envgen install"] / ms["uv pip sync"]
    for name, value in ms.items():
        print(f"{name:16} median {value / 1000:7.2f} s  (n={args.repeat})")
    print(f"ratio {ratio:.2f}x  (target <= {TARGET}x: {'met' if ratio <= TARGET else 'MISSED'})")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
