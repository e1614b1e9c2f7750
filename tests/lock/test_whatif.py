"""`envgen whatif`: a real lock made here (the loopback index and local conda channel), moved to
a newer and to an older torch; the package diff is checked against a second real lock made for
that target, and the decisions that change against the resolver's own."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.run import run_envgen

pytestmark = pytest.mark.integration

OLD = "deepspeed-0.18.2-torch2.9.0-cu128-py{py}-debian12-x86_64"
NEW = "deepspeed-0.18.2-torch2.12.0-cu130-py{py}-debian12-x86_64"


def _sources(make_args: list[str]) -> list[str]:
    """The make options whatif shares: matrix, channel, index, cache."""
    keep = ("--matrix-dir", "--channel", "--index-url", "--cache-dir")
    return [x for i, x in enumerate(make_args) if x in keep or (i and make_args[i - 1] in keep)]


def _pins(lock_dir: Path) -> dict[str, str]:
    text = (lock_dir / "requirements.lock.txt").read_text()
    return dict(re.findall(r"^([a-z0-9._-]+)==(\S+)", text, re.M))


def _conda(lock_dir: Path) -> dict[str, str]:
    manifest = json.loads((lock_dir / "envgen.lock.json").read_text())
    return {p["name"]: p["version"] for p in manifest["conda"]["packages"]}


def _expected(old: dict[str, str], new: dict[str, str]) -> dict:
    return {"added": sorted(new.keys() - old.keys()), "removed": sorted(old.keys() - new.keys()),
            "changed": sorted(k for k in old.keys() & new.keys() if old[k] != new[k])}


def _got(diff: dict) -> dict:
    return {"added": [a["name"] for a in diff["added"]],
            "removed": [r["name"] for r in diff["removed"]],
            "changed": [c["name"] for c in diff["changed"]]}


@pytest.mark.parametrize("start,torch,target", [("2.9.0", "2.12", NEW), ("2.12.0", "2.9", OLD)],
                         ids=["newer-torch", "older-torch"])
def test_whatif_diff_equals_a_real_lock_of_the_target(make_args, tmp_path, start, torch, target):
    from support.run import HOST_PY

    made = run_envgen(*make_args, "--torch", start, "--json")
    assert made.returncode == 0, made.stderr
    lock_dir = Path(json.loads(made.stdout)["directory"])
    proc = run_envgen("whatif", "--lock", str(lock_dir), "--torch", torch, *_sources(make_args),
                      "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    want = target.format(py=HOST_PY)
    assert answer["new"] == want and answer["feasible"]
    assert answer["released"] == ["cuda"]  # each torch has one CUDA here: the CUDA follows
    axes = {d["axis"]: d for d in answer["decisions"]}
    assert axes["torch"]["new"].startswith(torch) and axes["cuda"]["old"] != axes["cuda"]["new"]
    assert axes["nccl"]["new_reason"].startswith("pinned by the torch==")
    # the second, real lock of the target: the diff is exactly the difference of the two locks
    second = run_envgen(*[a if a != str(tmp_path / "locks") else str(tmp_path / "second")
                          for a in make_args], "--combination", want, "--json")
    assert second.returncode == 0, second.stderr
    other = Path(json.loads(second.stdout)["directory"])
    assert _got(answer["pip"]) == _expected(_pins(lock_dir), _pins(other))
    assert _got(answer["conda"]) == _expected(_conda(lock_dir), _conda(other))
    assert {"name": "torch", "old": _pins(lock_dir)["torch"], "new": _pins(other)["torch"]} \
        in answer["pip"]["changed"]
    assert answer["make"].startswith("envgen make --framework deepspeed --framework-version "
                                     "0.18.2 --torch ")
    assert answer["evidence"] == {"old": "T0", "new": "T0", "tier_lost": False}


def test_whatif_text_and_no_lock(make_args, tmp_path):
    assert run_envgen(*make_args, "--torch", "2.9.0").returncode == 0
    (lock_dir,) = (tmp_path / "locks").iterdir()
    proc = run_envgen("whatif", "--lock", str(lock_dir), "--torch", "2.12", "--no-lock",
                      *_sources(make_args))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith(f"What if {lock_dir.name} moves to --torch 2.12:")
    assert "(the lock's cuda could not stay: re-chosen)" in out
    assert "packages: not solved (--no-lock)" in out and "make it: envgen make " in out


def test_whatif_to_nothing_says_why_and_exits_3(make_args, tmp_path):
    assert run_envgen(*make_args, "--torch", "2.9.0").returncode == 0
    (lock_dir,) = (tmp_path / "locks").iterdir()
    proc = run_envgen("whatif", "--lock", str(lock_dir), "--torch", "1.0", *_sources(make_args))
    assert proc.returncode == 3
    assert "No combination satisfies: --framework deepspeed --framework-version 0.18.2 " \
        "--torch 1.0 --cuda 12.8" in proc.stderr
    assert "no torch 1.0 CUDA build" in proc.stderr and "Nearest feasible" in proc.stderr
    js = run_envgen("whatif", "--lock", str(lock_dir), "--torch", "1.0", "--json",
                    *_sources(make_args))
    assert js.returncode == 3
    answer = json.loads(js.stdout)  # one document, the error inside it
    assert answer["feasible"] is False and answer["new"] is None
    assert answer["why_not"]["kind"] == "infeasible"


def test_whatif_needs_a_change_and_a_lock(make_args, tmp_path):
    assert run_envgen(*make_args, "--torch", "2.9.0").returncode == 0
    (lock_dir,) = (tmp_path / "locks").iterdir()
    proc = run_envgen("whatif", "--lock", str(lock_dir), *_sources(make_args))
    assert proc.returncode == 2 and "what if what changes?" in proc.stderr
    proc = run_envgen("whatif", "--lock", str(tmp_path / "nope"), "--torch", "2.12")
    assert proc.returncode in (1, 2) and "nope" in proc.stderr


def test_a_lock_whose_own_combination_no_longer_resolves_says_so(make_args, tmp_path):
    """The facts moved under the lock (a modified copy of the matrix records a breakage of
    DeepSpeed 0.18.2 with torch 2.9 on CUDA 12.8): whatif names the lock, not the change,
    and points at drift."""
    import shutil

    assert run_envgen(*make_args, "--torch", "2.9.0").returncode == 0
    (lock_dir,) = (tmp_path / "locks").iterdir()
    matrix = Path(make_args[make_args.index("--matrix-dir") + 1])
    changed = tmp_path / "matrix-changed"
    shutil.copytree(matrix, changed)
    with open(changed / "curated" / "frameworks.toml", "a") as f:
        f.write('\n[[breakage]]\nframework = "deepspeed"\nversions = "==0.18.2"\n'
                'torch = ">=2.9,<2.10"\ncuda = "==12.8"\npython = ">=3.0"\n'
                'what = "found broken after the lock (test)"\nchecked_through = "0.18.2"\n'
                'source = "https://example.invalid/later"\n')
    args = [*_sources(make_args)]
    args[args.index("--matrix-dir") + 1] = str(changed)
    proc = run_envgen("whatif", "--lock", str(lock_dir), "--torch", "2.12", *args)
    assert proc.returncode == 1, proc.stderr
    assert f"the lock's own combination {lock_dir.name} no longer resolves" in proc.stderr
    assert "envgen drift --lock" in proc.stderr
    drift = run_envgen("drift", "--lock", str(lock_dir), "--matrix-dir", str(changed),
                       "--cache-dir", str(tmp_path / "cache"), "--json")
    assert drift.returncode == 1, drift.stderr
    kinds = [f["kind"] for f in json.loads(drift.stdout)["findings"]]
    assert "no-longer-resolves" in kinds


def test_whatif_stays_on_the_locks_own_indexes(make_args, lock_matrix, tmp_path):
    """A newer CUDA build of the target torch that only PyTorch's own index has (a curated
    variant) ranks first for a fresh resolve, but the lock came from PyPI alone: whatif takes
    the best build on the lock's indexes instead of one that needs a source never given."""
    import shutil

    matrix = shutil.copytree(lock_matrix, tmp_path / "matrix")
    with (matrix / "curated" / "torch.toml").open("a") as f:
        f.write('\n[[variants]]\ntorch = "2.12.0"\ncuda = ["13.1"]\n'
                'source = "https://example.invalid/pytorch-only"\n')
    cuda = json.loads((matrix / "harvested" / "cuda.json").read_text())
    base = next(t for t in cuda["toolkits"] if t["cuda"] == "13.0")
    cuda["toolkits"].append({**base, "cuda": "13.1", "nvcc_version": "13.1.80"})
    (matrix / "harvested" / "cuda.json").write_text(json.dumps(cuda))
    args = list(make_args)
    args[args.index("--matrix-dir") + 1] = str(matrix)
    fresh = run_envgen("resolve", "--matrix-dir", str(matrix), "--framework", "deepspeed",
                       "--torch", "2.12.0", "--python", args[args.index("--python") + 1],
                       "--os", "debian-12", "--json")
    assert fresh.returncode == 0, fresh.stderr
    assert json.loads(fresh.stdout)["combinations"][0]["cuda"] == "13.1"  # the premise
    made = run_envgen(*args, "--torch", "2.9.0", "--json")
    assert made.returncode == 0, made.stderr
    lock = json.loads(made.stdout)["directory"]
    proc = run_envgen("whatif", "--lock", lock, "--torch", "2.12", "--no-lock", "--json",
                      "--matrix-dir", str(matrix))
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["new"].startswith("deepspeed-0.18.2-torch2.12.0-cu130-"), answer["new"]
