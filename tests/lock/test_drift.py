"""`envgen drift`: a real lock made against the loopback index, then the index and the facts
change under it — a newer patch release, a yanked locked file, a file gone, a changed fact
(two snapshots of the matrix: the original and a modified copy), a newer known-good
combination."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.index_server import Served
from support.run import run_envgen
from support.wheels import build_wheel

pytestmark = pytest.mark.integration


@pytest.fixture
def locked(make_args, tmp_path):
    made = run_envgen(*make_args, "--torch", "2.9.0", "--json")
    assert made.returncode == 0, made.stderr
    return Path(json.loads(made.stdout)["directory"])


def _drift(lock_dir: Path, make_args: list[str], *extra: str):
    matrix = make_args[make_args.index("--matrix-dir") + 1]
    cache = make_args[make_args.index("--cache-dir") + 1]
    proc = run_envgen("drift", "--lock", str(lock_dir), "--matrix-dir", matrix,
                      "--cache-dir", cache + "-drift", "--json", *extra)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _kinds(answer: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in answer["findings"]:
        out.setdefault(f["kind"], []).append(f["subject"])
    return out


def test_a_fresh_lock_has_not_drifted(locked, make_args):
    code, answer = _drift(locked, make_args)
    assert code == 0 and answer["drifted"] is False
    assert answer["packages_checked"] == 6
    assert not any(f["kind"] in ("yanked", "gone", "fact-changed", "no-longer-resolves")
                   for f in answer["findings"])


def test_index_changes_are_found(locked, make_args, wheel_index, tmp_path):
    server, _ = wheel_index
    newer = build_wheel(tmp_path / "newer", "filelock", "3.16.2")
    minor = build_wheel(tmp_path / "newer", "filelock", "3.17.0")  # another series: not a patch
    served = [Served(filename=w.name, data=w.read_bytes()) for w in (newer, minor)]
    for s in served:
        server.state.add("/simple/filelock/", s)
    locked_ninja = next(s for p, s in server.state.files.items() if "/ninja-" in p)
    locked_packaging = next(s for p, s in server.state.files.items()
                            if p.endswith("/packaging-24.2-py3-none-any.whl"))
    locked_ninja.yanked = "broken build"
    pkg_page = server.state.projects["/simple/packaging/"]
    pkg_page.remove(locked_packaging)
    try:
        code, answer = _drift(locked, make_args)
    finally:
        locked_ninja.yanked = None
        pkg_page.append(locked_packaging)
        for s in served:
            server.state.projects["/simple/filelock/"].remove(s)
    kinds = _kinds(answer)
    assert code == 1 and answer["drifted"] is True
    assert kinds["yanked"] == ["ninja==1.11.1.1"]
    assert kinds["gone"] == ["packaging==24.2"]
    assert kinds["newer-patch"] == ["filelock==3.16.1"]
    patch = next(f for f in answer["findings"] if f["kind"] == "newer-patch")
    assert patch["detail"].startswith("3.16.2 is out (1 newer in 3.16.x)")


def test_changed_facts_are_found_in_a_modified_matrix(locked, make_args, tmp_path):
    """The second snapshot: the same matrix with CUDA 12.8's driver floor raised."""
    matrix = Path(make_args[make_args.index("--matrix-dir") + 1])
    changed = tmp_path / "matrix-changed"
    shutil.copytree(matrix, changed)
    cuda = changed / "curated" / "cuda.toml"
    text = cuda.read_text()
    head, _, tail = text.partition('cuda = "12.8"\nmin_driver = "525.60.13"')
    assert tail, "the fixture's CUDA 12.8 floor moved"
    cuda.write_text(head + 'cuda = "12.8"\nmin_driver = "570.86.10"' + tail)
    args = [*make_args]
    args[args.index("--matrix-dir") + 1] = str(changed)
    code, answer = _drift(locked, args)
    assert code == 1
    fact = next(f for f in answer["findings"] if f["kind"] == "fact-changed")
    assert fact["subject"] == "min_driver"
    assert fact["detail"] == ("525.60.13 when the lock was made, 570.86.10 in today's facts")


def test_a_newer_known_good_combination_is_news(locked, make_args, tmp_path):
    """A GPU record for deepspeed on torch 2.12 in the data dir: the lock (torch 2.9) hears
    of it, with the whatif line; news, not drift."""
    record = json.loads((Path(__file__).parents[1] / "fixtures" / "results" /
                         "ds-gpu-pass.json").read_text())
    data = tmp_path / "data"
    newer = "deepspeed-0.18.2-torch2.12.0-cu130-py3.11-debian12-x86_64"
    record["combination"] = newer
    src = tmp_path / "rec.json"
    src.write_text(json.dumps(record))
    added = run_envgen("results", "add", str(src), "--results-dir", str(data / "results"))
    assert added.returncode == 0, added.stderr
    code, answer = _drift(locked, make_args, "--data", str(data))
    news = [f for f in answer["findings"] if f["kind"] == "newer-known-good"]
    assert code == 0 and [f["subject"] for f in news] == [newer]
    assert news[0]["fix"] == ("envgen whatif --lock DIR --framework-version 0.18.2 --torch "
                              "2.12.0 --cuda 13.0")


def test_text_output_and_offline(locked, make_args):
    matrix = make_args[make_args.index("--matrix-dir") + 1]
    cache = make_args[make_args.index("--cache-dir") + 1] + "-text"
    online = run_envgen("drift", "--lock", str(locked), "--matrix-dir", matrix,
                        "--cache-dir", cache)
    assert online.returncode == 0, online.stderr
    assert online.stdout.startswith(f"{locked.name}: as made (6 pinned packages checked")
    offline = run_envgen("drift", "--lock", str(locked), "--matrix-dir", matrix,
                         "--cache-dir", cache, "--offline")
    assert offline.returncode == 0, offline.stderr  # the pages the first run cached


def test_what_torch_pins_exactly_is_reported_once_under_torch(locked, make_args, wheel_index,
                                                              tmp_path):
    """The stand-in torch 2.9.0 pins nvidia-nccl-cu12==2.27.5 (as the real one pins its CUDA
    wheels): a newer NCCL patch moves only with torch, so it is said under torch, once; a
    newer patch of what torch only names (filelock) stays its own finding."""
    server, _ = wheel_index
    wheels = [build_wheel(tmp_path / "newer", "nvidia-nccl-cu12", "2.27.7",
                          tag="py3-none-manylinux_2_18_x86_64"),
              build_wheel(tmp_path / "newer", "filelock", "3.16.2")]
    served = [(f"/simple/{n}/", Served(filename=w.name, data=w.read_bytes()))
              for n, w in zip(("nvidia-nccl-cu12", "filelock"), wheels, strict=True)]
    for page, s in served:
        server.state.add(page, s)
    try:
        _, answer = _drift(locked, make_args)
    finally:
        for page, s in served:
            server.state.projects[page].remove(s)
    kinds = _kinds(answer)
    assert sorted(kinds["newer-patch"]) == ["filelock==3.16.1", "torch==2.9.0"]
    grouped = next(f for f in answer["findings"] if f["subject"] == "torch==2.9.0")
    assert "1 package torch pins exactly has newer patches: nvidia-nccl-cu12 (2.27.7)" \
        in grouped["detail"]
    assert "envgen whatif" in grouped["fix"]

