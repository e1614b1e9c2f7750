"""Verify many locked combinations in one run on an offline GPU machine that already has torch.

A lent GPU machine (no network, its own torch preinstalled, little that can be carried to it)
can prove every framework release that accepts its torch in one run. Two halves:

``prepare`` (here, with network): the combinations the resolver offers for that machine's
torch/CUDA/Python/OS and not yet at T3, newest release first and the frameworks taken in turn,
each locked with ``envgen make --flavor venv``; every locked file except torch and the CUDA
wheels (torch, triton, nvidia-*, cuda-*: the machine's own) downloaded once into a shared
wheelhouse and checked against the lock's sha256. It stops adding combinations at a size
budget and writes ``plan.json``.

``run`` (there, standard library only): for each planned combination, newest first and a few
at a time, a venv that sees the machine's site-packages (its torch) through a .pth file, the
lock's build dependencies and then its packages installed offline, hash-checked, exactly as
the lock's header says (``pip install --no-deps --require-hashes --no-build-isolation``), and
then ``envgen verify all --lock … --record …``. Each combination's env is compared package by
package with its lock; records, logs and a summary go to ``--out``. Nothing starts after the
soft deadline and whatever still runs at the hard deadline is stopped, so a run always leaves
its finished records behind.

    python -m envgen.verify.batch prepare --torch 2.11.0 --cuda 13.0 --python 3.12 \\
        --os ubuntu-24.04 --gpu-arch sm_90 --nvcc 13.0 --out gpu-carry
    python -m envgen.verify.batch run gpu-carry --out "$OUT"     # on the GPU machine
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from envgen.lock import requirements
from envgen.proc import popen
from envgen.proc import run as proc_run

# the machine's own: its torch build and NVIDIA's CUDA wheels torch was built with (their PyPI
# names: nvidia-*, cuda-*, and torch's own triton)
MACHINE_OWNED = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")
TOOL_WHEELS = ("packaging", "fastjsonschema", "nvidia-ml-py")  # what envgen verify imports
CHUNK = 1 << 20
MAX_FILE = 1 << 30  # no single carried file is near this; a larger answer is not the lock's


def carried(text: str, machine_provides: frozenset[str] = frozenset()) -> str:
    """The lock's entries that are carried to the machine: every one but its torch/CUDA and
    what the plan leaves to the machine (``--machine-provides``: torch's own dependencies)."""
    return "\n".join(b for n, _, b in requirements.blocks(text)
                     if not MACHINE_OWNED.match(n) and n not in machine_provides) + "\n"


# ---------------------------------------------------------------- prepare (here, online)

def _envgen(*args: str) -> dict | list:
    proc = proc_run([sys.executable, "-m", "envgen", *args, "--json", "-q"],
                          capture_output=True, text=True, timeout=600)
    doc = json.loads(proc.stdout or "{}")
    if proc.returncode != 0:
        raise SystemExit(f"envgen {' '.join(args)} failed: {proc.stdout[-2000:]}{proc.stderr}")
    return doc


def _proven(tier_floor: str = "T3") -> set[str]:
    """Combinations already at ``tier_floor`` or above (T3, T4 sort after T0-T2)."""
    return {r["combination"] for r in _envgen("results", "show") if r["tier"] >= tier_floor}


def _fetch(url: str, sha256: str, dest: Path) -> None:
    if dest.exists() and hashlib.sha256(dest.read_bytes()).hexdigest() == sha256:
        return
    digest, part, got = hashlib.sha256(), dest.with_name(dest.name + ".part"), 0
    try:
        with urllib.request.urlopen(url, timeout=120) as resp, part.open("wb") as out:
            while chunk := resp.read(CHUNK):
                got += len(chunk)
                if got > MAX_FILE:
                    raise SystemExit(f"{url}: more than {MAX_FILE >> 20} MiB, not the lock's file")
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != sha256:
            raise SystemExit(f"{url}: sha256 {digest.hexdigest()} is not the lock's {sha256}")
        part.replace(dest)
    finally:
        part.unlink(missing_ok=True)


def _files(lock_dir: Path, names: set[str]):
    """The pylock.toml file (envgen.lock.pip_compile.Dist) the lock's target installs for each
    of ``names``: the wheel an installer there picks, else the sdist."""
    from envgen.lock import read_manifest
    from envgen.lock.pip_compile import parse_pylock

    target = read_manifest(lock_dir).target
    return [p.primary(target.python.rstrip("t"), target.python_platform)
            for p in parse_pylock((lock_dir / "pylock.toml").read_text(encoding="utf-8"))
            if requirements.normalize(p.name) in names]


def _pip_download(names: list[str], dest: Path) -> None:
    proc_run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary",
                    ":all:", "-d", str(dest), *names], check=True, timeout=600)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def prepare(args: argparse.Namespace) -> int:
    out = Path(args.out)
    locks, wheels, tool = out / "locks", out / "wheelhouse", out / "tool"
    for d in (locks, wheels, tool):
        d.mkdir(parents=True, exist_ok=True)
    request = ["--torch", args.torch, "--cuda", args.cuda, "--python", args.python, "--os",
               args.os, "--gpu-arch", args.gpu_arch, "--nvcc", args.nvcc, "--flavor", "venv"]
    proven = _proven()
    provides = frozenset(requirements.normalize(n) for n in args.machine_provides.split(",")
                         if n)
    queues = []
    for fw in args.frameworks.split(","):
        doc = _envgen("resolve", "--framework", fw, "--limit", "0", *request)
        queues.append([c["id"] for c in doc["combinations"] if c["id"] not in proven])
    order = [cid for round_ in _interleave(queues) for cid in round_]
    _pip_download(["pip", *TOOL_WHEELS], tool)
    libaio = _libaio_packages()
    _os_packages(out / "os", libaio)
    budget = args.budget_mib * (1 << 20)
    plan = []
    for cid in order:
        if args.limit and len(plan) >= args.limit:
            break
        _envgen("make", "--combination", cid, "--flavor", "venv", "--out", str(locks))
        lock = locks / cid
        wanted = _carried_pins(lock, provides)
        in_pylock = {(requirements.normalize(n), v) for n, v in _pylock_pins(lock)}
        for dist in _files(lock, {n for n, v in wanted if (n, v) in in_pylock}):
            _fetch(dist.url, dist.sha256, wheels / dist.filename)
        build_only = [b for pin, b in wanted.items() if pin not in in_pylock]
        if build_only:  # build dependencies at other versions than the main lock's
            req = out / "build-only.txt"
            req.write_text("\n".join(build_only) + "\n")
            _pip_download(["--require-hashes", "-r", str(req)], wheels)
            req.unlink()
        if _size(out) > budget:
            shutil.rmtree(lock)
            print(f"budget of {args.budget_mib} MiB reached before {cid}", file=sys.stderr)
            break
        plan.append({"id": cid, "framework": _envgen_manifest(lock)["combination"]["framework"]})
        print(f"{len(plan):3} {cid}  ({_size(out) / (1 << 20):.1f} MiB)", file=sys.stderr)
    _prune(wheels, locks)
    (out / "plan.json").write_text(json.dumps(
        {"machine": {"torch": args.torch, "cuda": args.cuda, "python": args.python,
                     "os": args.os}, "machine_provides": sorted(provides),
         "os_packages": libaio,
         "combinations": plan}, indent=2) + "\n")
    print(f"{len(plan)} combinations, {_size(out) / (1 << 20):.1f} MiB in {out}")
    return 0


def _libaio_packages() -> list[str]:
    """libaio's Debian packages, as the matrix names them: the venv flavor's OS package (the
    headers) and the Debian runtime image's (the library)."""
    from envgen.facts.matrix import Matrix

    matrix = Matrix.locate()
    names = [*matrix.facts.toolchain.venv_os_packages.get("debian", ()),
             *matrix.images.families["debian"].runtime]
    return sorted({n for n in names if n.startswith("libaio")})


def _os_packages(dest: Path, packages: list[str]) -> None:
    """libaio (the lock's OS package for async_io), unpacked, for a machine without it:
    Debian's build, since Ubuntu's archive is not reachable here (the run says which it used)."""
    debs = dest / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    debs.chmod(0o777)  # apt's download user (_apt) writes there
    proc_run(["apt-get", "download", *packages], cwd=debs, check=True, timeout=300)
    for deb in debs.glob("*.deb"):
        proc_run(["dpkg-deb", "-x", str(deb), str(dest / "root")], check=True, timeout=60)
    shutil.rmtree(debs)
    for link in [p for p in (dest / "root").rglob("*") if p.is_symlink()]:
        target = link.resolve()  # files, not links: what is carried to the machine
        link.unlink()
        shutil.copy2(target, link)


def _interleave(queues: list[list[str]]):
    for i in range(max(map(len, queues), default=0)):
        yield [q[i] for q in queues if i < len(q)]


def _pylock_pins(lock: Path) -> set[tuple[str, str]]:
    import tomllib

    doc = tomllib.loads((lock / "pylock.toml").read_text())
    return {(p["name"], p["version"]) for p in doc["packages"]}


def _carried_pins(lock: Path, provides: frozenset[str]) -> dict[tuple[str, str], str]:
    """(name, version) → requirement block of every carried entry of a lock's two pip files."""
    pins = {}
    for f in ("requirements.lock.txt", "build-requirements.lock.txt"):
        if (lock / f).exists():
            pins.update({(n, v): b for n, v, b in requirements.blocks((lock / f).read_text())
                         if not MACHINE_OWNED.match(n) and n not in provides})
    return pins


def _envgen_manifest(lock: Path) -> dict:
    return json.loads((lock / "envgen.lock.json").read_text())


def _prune(wheels: Path, locks: Path) -> None:
    """Drop files no planned lock names (those of a combination the budget left out)."""
    wanted = set()
    for lock in locks.iterdir():
        for f in ("requirements.lock.txt", "build-requirements.lock.txt"):
            if (lock / f).exists():
                wanted |= {(n, v) for n, v, _ in requirements.blocks((lock / f).read_text())}
    for f in wheels.iterdir():
        name, version = f.name.split("-")[:2]
        version = version.removesuffix(".tar.gz").removesuffix(".zip")
        if (requirements.normalize(name), version) not in wanted:
            f.unlink()


# ---------------------------------------------------------------- run (there, offline)

STOP = threading.Event()
REUSE = threading.Event()  # --reuse-envs: an env installed by an earlier run is verified again


def _machine_python() -> tuple[str, dict]:
    """The interpreter that has the machine's torch, and what it says of itself."""
    probe = ("import json, site, sys, sysconfig, torch; print(json.dumps({'torch': "
             "torch.__version__, 'cuda': torch.version.cuda, 'python': '%d.%d' % "
             "sys.version_info[:2], 'site': [p for p in site.getsitepackages() + "
             "[sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']] "
             "if p]}))")
    for cand in (sys.executable, shutil.which("python3"), shutil.which("python")):
        if not cand:
            continue
        proc = proc_run([cand, "-c", probe], capture_output=True, text=True, timeout=120)
        if proc.returncode == 0:
            return cand, json.loads(proc.stdout.strip().splitlines()[-1])
    raise SystemExit("no interpreter here imports torch: this run needs the machine's torch")


def _run(cmd: list[str], log: Path, env: dict, timeout: float) -> int:
    with log.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        proc = popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while proc.poll() is None:
            if STOP.is_set() or time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                f.write("\n[stopped: deadline]\n")
                return 124
            time.sleep(0.5)
        return proc.returncode


def _libaio_env(carry: Path) -> dict[str, str]:
    """Point the compilers and the loader at the carried libaio when the machine has none."""
    if Path("/usr/include/libaio.h").exists():
        return {}
    root = carry / "os" / "root" / "usr"
    lib = str(next(root.glob("lib/*-linux-gnu")))
    join = lambda var, value: ":".join(filter(None, [value, os.environ.get(var)]))  # noqa: E731
    return {"CPATH": join("CPATH", str(root / "include")),
            "LIBRARY_PATH": join("LIBRARY_PATH", lib),
            "LD_LIBRARY_PATH": join("LD_LIBRARY_PATH", lib)}


def _installed(python: str) -> dict[str, str]:
    """Name → version of what ``python`` imports: the first distribution of a name on its
    sys.path (the venv's own before a machine copy it shadows)."""
    code = ("import json, importlib.metadata as m; print(json.dumps([(d.metadata['Name'], "
            "d.version) for d in m.distributions()]))")
    proc = proc_run([python, "-c", code], capture_output=True, text=True, timeout=120)
    seen: dict[str, str] = {}
    for name, version in json.loads(proc.stdout or "[]") if proc.returncode == 0 else []:
        seen.setdefault(requirements.normalize(name), version)
    return seen


def _one(cid: str, carry: Path, work: Path, out: Path, machine: tuple[str, dict],
         hard_deadline: float) -> dict:
    started = time.monotonic()
    lock, env_dir, logs = carry / "locks" / cid, work / cid, out / "logs"
    log = logs / f"{cid}.log"
    mpython, facts = machine
    provides = frozenset(json.loads((carry / "plan.json").read_text())["machine_provides"])
    result = {"id": cid, "status": "error", "stage": "venv"}

    def left() -> float:
        return max(1.0, hard_deadline - time.monotonic())

    base = {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "TORCH_CUDA_ARCH_LIST", "PIP_INDEX_URL")}
    env = dict(base, **_libaio_env(carry), TORCH_EXTENSIONS_DIR=str(env_dir / "torch-extensions"),
               MAX_JOBS=os.environ.get("BATCH_MAX_JOBS", "4"), PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    python = str(env_dir / "env" / "bin" / "python")
    reuse = REUSE.is_set() and Path(python).exists()  # verify fails if the env is incomplete
    if not reuse and _run([mpython, "-m", "venv", "--clear", "--without-pip",
                           str(env_dir / "env")], log, env, left()):
        return result
    site_dir = "" if reuse else proc_run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, timeout=60).stdout.strip()
    # the machine's site-packages after the venv's own (its torch, its CUDA wheels)
    reuse or Path(site_dir, "zz_machine_site.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in facts["site"]))
    pip = [python, str(next((carry / "tool").glob("pip-*.whl"))) + "/pip", "install",
           "--no-index", "--find-links", str(carry / "wheelhouse"), "--no-deps",
           "--require-hashes", "--ignore-installed", "--no-compile"]
    reqs = {}
    for f in ("build-requirements.lock.txt", "requirements.lock.txt"):
        if (lock / f).exists():
            reqs[f] = env_dir / f"carried-{f}"
            reqs[f].write_text(carried((lock / f).read_text(), provides))
    result["stage"] = "install"
    if not reuse:
        if "build-requirements.lock.txt" in reqs and _run(
                [*pip, "-r", str(reqs["build-requirements.lock.txt"])], log, env, left()):
            return result
        if _run([*pip, "--no-build-isolation", "-r", str(reqs["requirements.lock.txt"])], log,
                env, left()):
            return result
        (env_dir / "installed").touch()
    result["reused_env"] = reuse
    installed = _installed(python)
    locked = {n: v for n, v, _ in requirements.blocks((lock / "requirements.lock.txt").read_text())}
    result["env_vs_lock"] = {
        "as_locked": sorted(n for n, v in locked.items() if installed.get(n) == v),
        "differs": {n: {"locked": v, "installed": installed.get(n)}
                    for n, v in locked.items() if installed.get(n) != v}}
    result["stage"] = "verify"
    record = out / "records" / f"{cid}.json"
    rc = _run([*_envgen_there(carry), "verify", "all", "-v", "--python", python,
               "--lock", str(lock), "--record", str(record)], log, env, left())
    result.update(status="pass" if rc == 0 else "fail", verify_rc=rc,
                  record=record.name if record.exists() else None)
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def _envgen_there(carry: Path) -> list[str]:
    """The envgen command on the GPU machine: this checkout with the carried tool wheels (its
    dependencies) first on sys.path."""
    code = ("import sys; sys.path[:0] = sys.argv[1].split(':'); del sys.argv[1]; "
            "from envgen.cli import entrypoint; entrypoint()")
    tool_path = ":".join([str(Path(__file__).resolve().parents[2]),
                          *map(str, sorted((carry / "tool").glob("*.whl")))])
    return [sys.executable, "-c", code, tool_path]


def _resolve_auto(carry: Path) -> dict:
    """``envgen resolve --gpu auto --driver auto --json`` on the GPU machine: what NVML reads
    there and what it resolves to (issue 41), kept in summary.json; never stops the run."""
    args = ["resolve", "--framework", "deepspeed", "--gpu", "auto", "--driver", "auto",
            "--json", "--limit", "1"]
    try:
        proc = proc_run([*_envgen_there(carry), *args], capture_output=True, text=True,
                        timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        return {"command": args, "error": str(exc)}
    try:
        answer = json.loads(proc.stdout)
    except ValueError:
        answer = proc.stdout[-4000:]
    return {"command": args, "exit_code": proc.returncode, "answer": answer,
            "stderr": proc.stderr[-4000:]}


def run(args: argparse.Namespace) -> int:
    carry, out = Path(args.carry).resolve(), Path(args.out).resolve()
    plan = json.loads((carry / "plan.json").read_text())
    work = Path(args.work).resolve()
    for d in (out / "records", out / "logs", work):
        d.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    soft, hard = t0 + args.stop_starting_after, t0 + args.hard_stop
    machine = _machine_python()
    summary = {"machine": machine[1], "python": machine[0], "plan": plan["machine"],
               "libaio": (f"carried (Debian's {', '.join(plan.get('os_packages', []))})"
                          if _libaio_env(carry) else "the machine's"),
               "results": [], "not_started": []}
    summary["auto"] = _resolve_auto(carry)
    want = plan["machine"]
    if (machine[1]["torch"].split("+")[0], machine[1]["cuda"], machine[1]["python"]) != (
            want["torch"], want["cuda"], want["python"]):
        raise SystemExit(f"this machine has torch {machine[1]['torch']} (CUDA "
                         f"{machine[1]['cuda']}, Python {machine[1]['python']}); the plan "
                         f"was made for {want}")
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    if args.reuse_envs:
        REUSE.set()
    todo = [(c["id"], c["framework"]) for c in plan["combinations"]]
    estimate = dict(kv.split("=") for kv in args.estimate.split(","))
    print(f"{len(todo)} combinations, {args.jobs} at a time; torch {machine[1]['torch']}",
          flush=True)

    def fits(framework: str) -> bool:  # started only if it can finish before the hard stop
        now = time.monotonic()
        return now < soft and now + float(estimate.get(framework, 0)) < hard

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        running: set[concurrent.futures.Future] = set()
        while todo or running:
            while len(running) < args.jobs and not STOP.is_set():
                nxt = next((t for t in todo if fits(t[1])), None)
                if nxt is None:
                    break
                todo.remove(nxt)
                running.add(pool.submit(_one, nxt[0], carry, work, out, machine, hard))
            if not running:
                break
            done, running = concurrent.futures.wait(running, timeout=5,
                                                    return_when="FIRST_COMPLETED")
            for fut in done:
                res = fut.result()
                summary["results"].append(res)
                print(f"{time.monotonic() - t0:6.0f} s  {res['status']:5} {res['stage']:8} "
                      f"{res['id']}", flush=True)
            if time.monotonic() > hard:
                STOP.set()
    summary["not_started"] = [cid for cid, _ in todo]
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    # one file back: the device tool returns a bounded number of files from a run
    proc_run(["tar", "-C", str(out), "-czf", str(out / "batch.tar.gz"), "records", "logs",
                    "summary.json"], check=True, timeout=120)
    for d in ("records", "logs"):
        shutil.rmtree(out / d)
    print(f"{sum(r['status'] == 'pass' for r in summary['results'])} passed, "
          f"{sum(r['status'] == 'fail' for r in summary['results'])} failed, "
          f"{sum(r['status'] == 'error' for r in summary['results'])} not verified, "
          f"{len(todo)} not started, {time.monotonic() - t0:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m envgen.verify.batch", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("prepare", help="lock and download what the GPU machine needs")
    pr.add_argument("--frameworks", default="deepspeed,megatron-core")
    for opt in ("torch", "cuda", "python", "os", "gpu-arch", "nvcc"):
        pr.add_argument(f"--{opt}", required=True)
    pr.add_argument("--out", default="gpu-carry")
    pr.add_argument("--machine-provides", default="", metavar="NAMES",
                    help="packages left to the machine (comma-separated): torch's own "
                    "dependencies, which a machine with torch has")
    pr.add_argument("--budget-mib", type=int, default=56, help="stop adding combinations here")
    pr.add_argument("--limit", type=int, default=0, help="at most this many combinations")
    ru = sub.add_parser("run", help="verify the planned combinations (on the GPU machine)")
    ru.add_argument("carry")
    ru.add_argument("--out", required=True)
    ru.add_argument("--work", default="/tmp/envgen-batch")
    ru.add_argument("--jobs", type=int, default=6)
    ru.add_argument("--stop-starting-after", type=float, default=380)
    ru.add_argument("--hard-stop", type=float, default=540)
    ru.add_argument("--reuse-envs", action="store_true",
                    help="verify again the envs an earlier run installed under --work")
    ru.add_argument("--estimate", default="deepspeed=240,megatron-core=60",
                    help="seconds one combination of each framework takes (none starts "
                    "that could not finish by --hard-stop)")
    args = p.parse_args(argv)
    return prepare(args) if args.cmd == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())
