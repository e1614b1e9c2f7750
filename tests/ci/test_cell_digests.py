"""Per-cell fact digests: `envgen matrix update --only cell-digests` writes them, the committed
file is current, and `envgen matrix github --changed-since REF` lists exactly the cells whose
facts moved since REF (two snapshots of the matrix in a real git repository: the original and
a modified copy), none when nothing moved."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support.run import run_envgen

from envgen.ci.digests import FILE, cell_digests, parse
from envgen.facts.matrix import Matrix

ROOT = Path(__file__).parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "matrix"
DS = "deepspeed-0.18.2-torch2.9.0-cu128-py3.12-ubuntu22.04-x86_64"
MC = "megatron-core-0.12.0-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64"


def test_the_committed_digests_are_current():
    """A hand edit of curated/ must come with `envgen matrix update --only cell-digests
    --write`, or --changed-since would report stale differences."""
    matrix = Matrix(matrix_dir=ROOT / "matrix", data_dir=ROOT / "matrix")
    committed = parse((ROOT / "matrix" / FILE).read_text(), FILE)
    assert committed == cell_digests(matrix.cells, matrix.facts), (
        "run: envgen matrix update --only cell-digests --write")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture
def repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo / "matrix")
    (repo / "matrix" / "cells.toml").write_text(
        f'[[cell]]\ncombination = "{DS}"\n\n[[cell]]\ncombination = "{MC}"\n')
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.email=t@example.org", "-c", "user.name=t", "add", "-A")
    _git(repo, "-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-qm", "facts")
    written = run_envgen("matrix", "update", "--only", "cell-digests", "--write",
                         "--matrix-dir", str(repo / "matrix"))
    assert written.returncode == 0, written.stderr
    assert "2 of 2 cells changed; wrote" in written.stdout
    _git(repo, "-c", "user.email=t@example.org", "-c", "user.name=t", "add", "-A")
    _git(repo, "-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-qm", "digests")
    return repo


def _changed(repo: Path, ref: str) -> tuple[list[str], str]:
    proc = run_envgen("matrix", "github", "--changed-since", ref, "--force", "--matrix-dir",
                      str(repo / "matrix"), "--locks", str(repo / "locks"))
    assert proc.returncode == 0, proc.stderr
    return [e["combination"] for e in json.loads(proc.stdout)["include"]], proc.stderr


def test_nothing_changed_means_no_cells(repo):
    cells, err = _changed(repo, "HEAD")
    assert cells == [] and "cells whose facts changed since HEAD: 0" in err


def test_a_changed_fact_selects_only_the_cells_it_decides(repo):
    cuda = repo / "matrix" / "curated" / "cuda.toml"
    text = cuda.read_text()
    old = 'cuda = "12.8"\nmin_driver = "525.60.13"'
    assert old in text
    cuda.write_text(text.replace(old, 'cuda = "12.8"\nmin_driver = "570.86.10"'))
    cells, _ = _changed(repo, "HEAD")
    assert cells == [DS]  # CUDA 12.8's floor decides the DeepSpeed cell, not Megatron's (12.1)
    # recorded, committed: nothing has changed since the new commit, everything since the first
    assert run_envgen("matrix", "update", "--only", "cell-digests", "--write", "--matrix-dir",
                      str(repo / "matrix")).returncode == 0
    _git(repo, "-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-qam", "floor")
    assert _changed(repo, "HEAD")[0] == []
    assert _changed(repo, "HEAD~1")[0] == [DS]
    assert _changed(repo, "HEAD~2")[0] == [DS, MC]  # no digests were committed there


def test_a_bad_revision_is_a_usage_error(repo):
    proc = run_envgen("matrix", "github", "--changed-since", "no-such-ref", "--matrix-dir",
                      str(repo / "matrix"))
    assert proc.returncode == 2
    assert "--changed-since no-such-ref: no such commit" in proc.stderr
    assert "fetch-depth: 0" in proc.stderr


def test_a_written_update_records_the_digests_when_there_are_cells(tmp_path):
    """What `envgen matrix update --write` runs after writing harvested/: the digests of the
    new snapshot next to it; nothing for a matrix without GPU cells."""
    from envgen.cli.context import Context
    from envgen.cli.matrix_update import _write_digests

    matrix = tmp_path / "matrix"
    shutil.copytree(FIXTURE, matrix)
    ctx = Context(matrix_dir=matrix, data_dir=matrix)
    assert _write_digests(ctx, matrix) is None and not (matrix / FILE).exists()
    (matrix / "cells.toml").write_text(f'[[cell]]\ncombination = "{DS}"\n')
    written = _write_digests(ctx, matrix)
    assert written == matrix / FILE
    fresh = Matrix(matrix_dir=matrix, data_dir=matrix)
    assert parse(written.read_text(), FILE) == cell_digests(fresh.cells, fresh.facts)
