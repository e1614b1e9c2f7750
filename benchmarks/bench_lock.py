"""Lock benchmarks: `envgen make` with warm caches, and envgen's pip-lock step against a bare
`uv pip compile` of the same inputs.

1. make: wall time of `envgen make ...` as a subprocess (Python start-up, resolve, conda solve
   with py-rattler, pip resolve with uv, render, atomic write), caches warm; median.
2. pip-lock: envgen's pip step (`compile_pip`: requirements file, uv run, PEP 751 parse, the
   packages) against the bare `uv pip compile` of the same inputs: the same requirement
   lines, Python version, platform, index URLs, cache, hashes and output format
   (`compile_command`, the line envgen runs), and like envgen a fresh requirements file and
   a fresh output file every run (uv reads an existing output file as preferences, which
   would make the baseline a different job). Runs alternate; medians and their ratio.
3. conda: the py-rattler solve alone; median.

By default everything runs on this machine: the combination is locked from the test
fixture matrix (tests/support/lock_env.py) against a conda-forge look-alike channel and a
PEP 503 index on loopback serving small real wheels (tests/support), so uv's work is the
resolve itself, not the network. `--index-url URL` (and `--channel`) lock a combination of the
committed matrix against real indexes instead.

Run: `python benchmarks/bench_lock.py [--repeat N] [--channel DIR_OR_URL] [--index-url URL]`
or `nox -s bench`. Targets: make ≤ 1 s warm; pip-lock ≤ 1.1 × bare uv.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from timing import installed_env, paired_ms  # noqa: E402

from envgen.facts import find_matrix_dir  # noqa: E402
from envgen.facts.matrix import Matrix  # noqa: E402
from envgen.lock import LockOptions, pip_compile  # noqa: E402
from envgen.lock.conda_solve import solve_conda  # noqa: E402
from envgen.lock.flavors import make_plan  # noqa: E402
from envgen.lock.pip_compile import compile_command, compile_pip  # noqa: E402
from envgen.resolve import Request, resolve  # noqa: E402

HOST_PY = f"{sys.version_info.major}.{sys.version_info.minor}"
UV_ENV = ("UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_INDEX", "UV_DEFAULT_INDEX", "UV_FIND_LINKS",
          "PIP_FIND_LINKS", "UV_PYTHON")  # what compile_pip drops from uv's environment


def local_channel(where: Path, python: str) -> Path:
    from support.conda_channel import build_channel, toolchain_packages

    return build_channel(where, toolchain_packages(python=python, cudas=("12.8", "13.0", "13.2"),
                                                   gccs=(11, 12, 13, 14, 15)))


@contextlib.contextmanager
def loopback_index(where: Path):
    """The lock tests' PEP 503 index on 127.0.0.1 with their stand-in wheels; yields its URL."""
    from support.index_server import IndexServer
    from support.lock_env import wheels
    from support.wheels import serve_wheels

    with IndexServer() as server:
        yield serve_wheels(server, wheels(where))


def bare_uv(pip, cache: Path, tmp: Path):
    """`uv pip compile` of ``pip``'s inputs into a fresh output file, as compile_pip runs it."""
    env = {k: v for k, v in os.environ.items() if k not in UV_ENV}

    def run() -> None:
        with tempfile.TemporaryDirectory(prefix="bare-uv-", dir=tmp) as where:
            req_in, out = Path(where) / "requirements.in", Path(where) / "pylock.toml"
            req_in.write_text("".join(f"{r}\n" for r in pip.requirements), encoding="utf-8")
            cmd = compile_command(req_in, out, python_version=pip.python_version,
                                  python_platform=pip.python_platform, index_url=pip.index_url,
                                  extra_index_urls=pip.extra_index_urls, cache_dir=cache,
                                  offline=False, exclude_newer=None)
            subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", "--runs", type=int, default=9, dest="repeat",
                    help="runs per median")
    ap.add_argument("--channel", help="conda channel (default: a local look-alike built here)")
    ap.add_argument("--index-url", help="Python package index (default: a loopback index of "
                    "stand-in wheels and the fixture matrix)")
    ap.add_argument("--framework", default="deepspeed")
    ap.add_argument("--cuda", help="default: 13.2 with --index-url, else the fixture's best")
    ap.add_argument("--python", default=HOST_PY)
    args = ap.parse_args()

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="envgen-bench-lock-")))
        cache = tmp / "cache"
        if args.index_url:
            index, matrix = args.index_url, find_matrix_dir(None)
            cuda = args.cuda or "13.2"
        else:
            from support.lock_env import _extend_matrix

            index = stack.enter_context(loopback_index(tmp / "wheels"))
            matrix, cuda = _extend_matrix(tmp / "matrix"), args.cuda
        channel = args.channel or str(local_channel(tmp / "conda-forge", args.python))
        request = ["--framework", args.framework, "--python", args.python,
                   *(["--cuda", cuda] if cuda else []),
                   *([] if args.index_url else ["--os", "debian-12"])]
        make = [sys.executable, "-m", "envgen", "make", "--matrix-dir", str(matrix), *request,
                "--channel", channel, "--index-url", index, "--cache-dir", str(cache),
                "--out", str(tmp / "locks"), "-q"]
        env = installed_env(pycache=tmp / "pycache")  # as installed code runs
        subprocess.run(make, check=True, stdout=subprocess.DEVNULL, env=env)  # warm the caches
        t_make = paired_ms({"make": lambda: subprocess.run(make, check=True, env=env,
                                                           stdout=subprocess.DEVNULL)},
                           args.repeat)["make"]

        facts = Matrix(matrix_dir=Path(matrix)).facts
        combo = resolve(Request(framework=args.framework, cuda=cuda, python=args.python,
                                os=None if args.index_url else "debian-12", flavor="conda"),
                        facts, limit=1)[0]
        options = LockOptions(channels=(channel,), index_url=index)
        plan = make_plan(facts, combo, options, Matrix(matrix_dir=Path(matrix)).index_urls())
        pip = plan.pip

        def envgen_pip() -> None:
            pip_compile.uv_binary.cache_clear()  # as in a fresh `envgen make`
            pip_compile.uv_platforms.cache_clear()
            compile_pip(pip.requirements, python_version=pip.python_version,
                        python_platform=pip.python_platform, index_url=pip.index_url,
                        extra_index_urls=pip.extra_index_urls, cache_dir=cache)

        bare = bare_uv(pip, cache, tmp)
        bare()  # warm uv's cache for these inputs (make warmed it for the same ones)
        envgen_pip()
        t = paired_ms({"bare": bare, "envgen": envgen_pip}, args.repeat)
        t_conda = paired_ms({"conda": lambda: solve_conda(plan.conda, cache_dir=cache)},
                            args.repeat)["conda"]

    print(f"combination   {combo.id}")
    print(f"conda channel {channel}")
    print(f"pip index     {pip.index_url}")
    print(f"requirements  {' '.join(pip.requirements)}")
    print(f"runs          {args.repeat} (medians)")
    print(f"make (CLI, warm caches)     {t_make:8.0f} ms   target ≤ 1000 ms")
    print(f"conda solve (py-rattler)    {t_conda:8.0f} ms")
    print(f"pip lock, envgen            {t['envgen']:8.0f} ms")
    print(f"pip lock, bare uv compile   {t['bare']:8.0f} ms")
    print(f"ratio envgen / bare uv      {t['envgen'] / t['bare']:8.2f}      target ≤ 1.10")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
