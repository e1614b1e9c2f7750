"""Lock benchmarks: `envgen make` with warm caches, and envgen's pip-lock step against bare
`uv pip compile` of the same inputs.

1. make: wall time of `envgen make ...` as a subprocess (Python start-up, resolve, conda solve
   with py-rattler, pip resolve with uv, render, atomic write), caches warm; median.
2. pip-lock: envgen's pip step (`compile_pip`: uv run + PEP 751 parse + wheel selection)
   against the identical `uv pip compile` command run bare; medians and their ratio.
3. conda: the py-rattler solve alone; median.

The conda part is solved against a local channel (conda-forge is unreachable on the machines
this was measured on; the script builds a conda-forge look-alike with tests/support unless
--channel is given); the pip part against the real PyPI unless --index-url is given.

Run: `python benchmarks/bench_lock.py [--runs N] [--channel DIR_OR_URL] [--index-url URL]`
or `nox -s bench`. Targets: make ≤ 1 s warm; pip-lock ≤ 1.2 × bare uv.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from envgen.config import cache_root
from envgen.facts import find_matrix_dir, load_facts
from envgen.harvest.sources import load_sources
from envgen.lock import LockOptions
from envgen.lock.conda_solve import solve_conda
from envgen.lock.pip_compile import compile_command, compile_pip
from envgen.lock.plan import make_plan
from envgen.resolve import Request, resolve

ROOT = Path(__file__).resolve().parent.parent


def local_channel(where: Path, python: str) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.conda_channel import build_channel, toolchain_packages

    return build_channel(where, toolchain_packages(python=python, cudas=("12.8", "13.2"),
                                                   gccs=(11, 12, 13, 14, 15)))


def median_time(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--channel", help="conda channel (default: a local look-alike built here)")
    ap.add_argument("--index-url", help="Python package index (default: PyPI)")
    ap.add_argument("--framework", default="deepspeed")
    ap.add_argument("--cuda", default="13.2")
    ap.add_argument("--python", default=f"{sys.version_info.major}.{sys.version_info.minor}")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="envgen-bench-lock-"))
    channel = args.channel or str(local_channel(tmp / "conda-forge", args.python))
    request = ["--framework", args.framework, "--cuda", args.cuda, "--python", args.python]
    sources = ["--channel", channel] + (["--index-url", args.index_url] if args.index_url else [])
    make = [sys.executable, "-m", "envgen", "make", *request, *sources, "--out",
            str(tmp / "locks"), "-q"]
    subprocess.run(make, check=True, stdout=subprocess.DEVNULL)  # warm the caches
    t_make = median_time(lambda: subprocess.run(make, check=True, stdout=subprocess.DEVNULL),
                         args.runs)

    matrix = find_matrix_dir(None)
    facts = load_facts(matrix)
    combo = resolve(Request(framework=args.framework, cuda=args.cuda, python=args.python,
                            flavor="conda"), facts, limit=1)[0]
    options = LockOptions(channels=(channel,), index_url=args.index_url)
    plan = make_plan(facts, combo, options, {i.name: i.url for i in load_sources(matrix).indexes})
    cache = cache_root()
    pip = plan.pip

    def envgen_pip():
        compile_pip(pip.requirements, python_version=pip.python_version,
                    python_platform=pip.python_platform, index_url=pip.index_url,
                    extra_index_urls=pip.extra_index_urls, cache_dir=cache)

    req_in, out = tmp / "requirements.in", tmp / "pylock.toml"
    req_in.write_text("".join(f"{r}\n" for r in pip.requirements))
    bare = compile_command(req_in, out, python_version=pip.python_version,
                           python_platform=pip.python_platform, index_url=pip.index_url,
                           extra_index_urls=pip.extra_index_urls, cache_dir=cache,
                           offline=False, exclude_newer=None)
    t_bare = median_time(lambda: subprocess.run(bare, check=True), args.runs)
    t_pip = median_time(envgen_pip, args.runs)
    t_conda = median_time(lambda: solve_conda(plan.conda, cache_dir=cache), args.runs)

    print(f"combination   {combo.id}")
    print(f"conda channel {channel}")
    print(f"pip index     {pip.index_url}")
    print(f"runs          {args.runs} (medians)")
    print(f"make (CLI, warm caches)     {t_make * 1000:8.0f} ms   target ≤ 1000 ms")
    print(f"conda solve (py-rattler)    {t_conda * 1000:8.0f} ms")
    print(f"pip lock, envgen            {t_pip * 1000:8.0f} ms")
    print(f"pip lock, bare uv compile   {t_bare * 1000:8.0f} ms")
    print(f"ratio envgen / bare uv      {t_pip / t_bare:8.2f}      target ≤ 1.20")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
