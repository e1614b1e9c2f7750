"""`envgen matrix github`: cells due = no record for their lock hash (or not locked yet)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.run import run_envgen

from envgen.ci.cells import Cell, load_cells
from envgen.ci.github import GithubEntry, github_matrix
from envgen.errors import DataError

A = "deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64"
B = "megatron-core-0.15.2-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64"
C = "colossalai-0.5.0-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64"
RECORD = Path(__file__).parents[1] / "fixtures" / "results" / "ds-gpu-pass.json"


def _lock(locks: Path, cid: str, h: str) -> None:
    (locks / cid).mkdir(parents=True)
    (locks / cid / "envgen.lock.json").write_text(json.dumps({"id": cid, "lock_hash": h}))


@pytest.fixture
def cells_file(tmp_path) -> Path:
    p = tmp_path / "cells.toml"
    p.write_text(f'[[cell]]\ncombination = "{A}"\nflavor = "venv"\ngpu_arch = "sm_90"\n\n'
                 f'[[cell]]\ncombination = "{B}"\n\n[[cell]]\ncombination = "{C}"\n')
    return p


def test_due_cells(tmp_path, cells_file):
    locks = tmp_path / "locks"
    _lock(locks, A, "sha256:" + "a" * 64)
    _lock(locks, B, "sha256:" + "b" * 64)
    cells = load_cells(cells_file)
    matrix = github_matrix(cells, locks, verified={"sha256:" + "a" * 64})
    assert [e["combination"] for e in matrix.to_dict()["include"]] == [B, C]
    assert matrix.include[1].lock_hash is None  # C is not locked yet
    assert matrix.counts == {"cells": 3, "verified": 1, "unlocked": 1, "due": 2}
    assert matrix.summary == "3 cells: 2 due (1 not locked yet), 1 already verified"
    forced = github_matrix(cells, locks, verified={"sha256:" + "a" * 64}, force=True)
    assert len(forced.include) == 3
    assert forced.to_dict()["include"][0]["make_options"] == "--flavor venv --gpu-arch sm_90"


def test_one_changed_lock_makes_one_cell_due(tmp_path, cells_file):
    locks = tmp_path / "locks"
    hashes = {A: "sha256:" + "a" * 64, B: "sha256:" + "b" * 64, C: "sha256:" + "c" * 64}
    for cid, h in hashes.items():
        _lock(locks, cid, h)
    cells = load_cells(cells_file)
    assert github_matrix(cells, locks, set(hashes.values())).to_dict() == {"include": []}
    shutil.rmtree(locks / B)
    _lock(locks, B, "sha256:" + "d" * 64)  # re-locked: a new hash, no result for it
    due = github_matrix(cells, locks, set(hashes.values())).include
    assert [e.combination for e in due] == [B]


def test_each_framework_and_cuda_has_one_moving_alias_on_its_newest_cell(tmp_path):
    from envgen.ci.github import moving_aliases

    older = "deepspeed-0.18.9-torch2.15.0-cu132-py3.12-ubuntu22.04-x86_64"
    newer_py = "deepspeed-0.19.8-torch2.15.0-cu132-py3.12-ubuntu22.04-x86_64"
    arm = "deepspeed-0.19.8-torch2.15.0-cu132-py3.12-ubuntu22.04-aarch64"
    free = "deepspeed-0.19.8-torch2.15.0-cu132-py3.14t-ubuntu22.04-x86_64"  # ranks last
    p = tmp_path / "cells.toml"
    p.write_text("".join(f'[[cell]]\ncombination = "{c}"\n\n'
                         for c in (older, A, free, newer_py, B, C, arm)))
    cells = load_cells(p)
    assert moving_aliases(cells) == {newer_py: "deepspeed-cu132", B: "megatron-core-cu121",
                                     C: "colossalai-cu121", arm: "deepspeed-cu132-aarch64"}
    entries = {e["combination"]: e["aliases"]
               for e in github_matrix(cells, tmp_path, verified=(), force=True).to_dict()[
                   "include"]}
    assert entries[older] == entries[A] == "" and entries[newer_py] == "deepspeed-cu132"


def test_bad_cells_file_lists_every_problem(tmp_path):
    p = tmp_path / "cells.toml"
    p.write_text(f'[[cell]]\ncombination = "nope"\n\n[[cell]]\ncombination = "{A}"\n'
                 f'flavor = "docker"\ncolour = 1\n\n[[cell]]\ncombination = "{A}"\n')
    with pytest.raises(DataError) as exc:
        load_cells(p)
    msg = exc.value.message
    assert "cell[0].combination: 'nope' is not a combination id" in msg
    assert "cell[1].flavor: 'docker' is not conda, venv or os-package" in msg
    assert "cell[1]: unknown key(s) colour" in msg
    assert f"cell[2]: {A} is listed twice" in msg


def test_cli_reads_results_by_lock_hash(tmp_path, cells_file):
    record = json.loads(RECORD.read_text())
    locks, results = tmp_path / "locks", tmp_path / "results"
    _lock(locks, record["combination"], record["lock_hash"])
    cells_file.write_text(f'[[cell]]\ncombination = "{record["combination"]}"\n\n'
                          f'[[cell]]\ncombination = "{C}"\n')
    added = run_envgen("results", "add", str(RECORD), "--results-dir", str(results))
    assert added.returncode == 0, added.stderr
    proc = run_envgen("matrix", "github", "--cells", str(cells_file), "--locks", str(locks),
                      "--results-dir", str(results))
    assert proc.returncode == 0, proc.stderr
    assert [e["combination"] for e in json.loads(proc.stdout)["include"]] == [C]
    assert "2 cells: 1 due (1 not locked yet), 1 already verified" in proc.stderr
    bad = run_envgen("matrix", "github", "--cells", str(tmp_path / "missing.toml"))
    assert bad.returncode == 1 and "does not exist" in bad.stderr


def test_the_committed_cells_file_loads():
    cells = load_cells(Path(__file__).parents[2] / "matrix" / "cells.toml")
    assert cells and all(isinstance(c, Cell) for c in cells)


def test_the_matrix_is_one_line_of_compact_json(tmp_path, cells_file):
    locks = tmp_path / "locks"
    _lock(locks, A, "sha256:" + "a" * 64)
    matrix = github_matrix(load_cells(cells_file), locks, verified=frozenset())
    assert matrix.to_json() == json.dumps(matrix.to_dict(), separators=(",", ":"))
    assert "\n" not in matrix.to_json() and matrix.due == 3
    assert matrix.include[0] == GithubEntry(combination=A, lock_hash="sha256:" + "a" * 64,
                                            make_options="--flavor venv --gpu-arch sm_90",
                                            aliases="deepspeed-cu132")


def test_a_lock_manifest_that_is_not_one_is_bad_data(tmp_path, cells_file):
    locks = tmp_path / "locks"
    (locks / A).mkdir(parents=True)
    (locks / A / "envgen.lock.json").write_text("[1, 2]")
    with pytest.raises(DataError, match="is not a lock manifest") as exc:
        github_matrix(load_cells(cells_file), locks, verified=frozenset())
    assert f"nox -s lock -- {A}" in exc.value.hint


def test_the_cells_are_read_by_the_facts_loader(tmp_path, cells_file):
    from envgen.ci import cells as ci_cells
    from envgen.facts import cells as facts_cells

    assert ci_cells.Cell is facts_cells.Cell and ci_cells.load_cells is facts_cells.read_cells
    assert cells_file == tmp_path / "cells.toml"
    assert facts_cells.load_cells(tmp_path) == facts_cells.read_cells(cells_file)


def test_ids_the_resolver_builds_parse_back():
    """One id pattern (envgen/ids.py) for the cells, the records and the resolver."""
    from envgen.ids import parse_combination_id
    from envgen.resolve.combination import combination_id

    for cid in (A, B, C, "deepspeed-0.19.8-torch2.15.0-cu132-py3.13t-debian12-aarch64"):
        fields = parse_combination_id(cid)
        assert fields is not None
        assert combination_id(fields["framework"], fields["framework_version"], fields["torch"],
                              fields["cuda"], fields["python"], fields["os"],
                              fields["platform"]) == cid
    assert parse_combination_id("x") is None


def test_cells_are_read_back_compiled_until_the_file_changes(tmp_path, monkeypatch):
    """`envgen matrix github` reads cells.toml once per change (no TOML, no schema after
    that); an edit is read and checked again, and a bad file is refused every time."""
    from envgen.facts import cells as mod

    monkeypatch.setenv("ENVGEN_FACTS_CACHE", "1")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "cells.toml"
    path.write_text(f'[[cell]]\ncombination = "{A}"\nflavor = "venv"\n')
    first = mod.read_cells(path)
    assert [(c.combination, c.flavor) for c in first] == [(A, "venv")]
    calls = []
    monkeypatch.setattr(mod, "_read_cells", lambda p: calls.append(p) or ())
    assert mod.read_cells(path) == first and calls == []  # the compiled copy
    monkeypatch.undo()
    monkeypatch.setenv("ENVGEN_FACTS_CACHE", "1")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    path.write_text(f'[[cell]]\ncombination = "{A}"\nflavour = "venv"\n')  # a typo
    for _ in range(2):
        with pytest.raises(DataError, match="flavour"):
            mod.read_cells(path)
