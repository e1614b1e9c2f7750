"""The record store: one file per record, named by content; add validates everything first."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from results_data import ATTEMPTS, INVALID, RECORDS, VERIFY, load_json

from envgen.atomic import write_file
from envgen.errors import DataError, FilesystemError, UsageError
from envgen.results import add, load
from envgen.results.attempt import AttemptRecord
from envgen.results.record import RecordError, ResultRecord
from envgen.results.store import parse_any, read_record_file, record_path, render


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_add_stores_one_pretty_file_per_record_named_by_content(tmp_path):
    results = tmp_path / "results"
    outcomes = add(results, RECORDS)
    assert [o.added for o in outcomes] == [True] * len(RECORDS)
    for source, o in zip(RECORDS, outcomes, strict=True):
        data = json.loads(source.read_text())
        kind = AttemptRecord if data["schema"] == "attempt/1" else ResultRecord
        record = kind.from_dict(data)
        assert type(o.record) is kind and o.record == record
        stamp = record.finished[:19].replace("-", "").replace(":", "")
        assert o.path == results / record.combination / f"{stamp}Z-{record.id[:12]}.json"
        text = o.path.read_text(encoding="utf-8")
        first = '{\n  "schema": 1,\n  "combination": ' if kind is ResultRecord else \
            '{\n  "schema": "attempt/1",\n  "tier": '
        assert text.endswith("}\n") and text.startswith(first)
        assert json.loads(text) == record.to_dict() == data
    assert {type(o.record) for o in outcomes} == {AttemptRecord, ResultRecord}
    assert sorted(_files(results)) == sorted(
        o.path.relative_to(results).as_posix() for o in outcomes)


def test_fractional_seconds_are_dropped_from_the_name(tmp_path):
    (o,) = add(tmp_path, [p for p in RECORDS if p.stem == "megatron-cpu-pass"])
    assert o.path.name.startswith("20260303T120230Z-")  # finished 2026-03-03T12:02:30.125Z


def test_adding_the_same_record_again_changes_nothing(tmp_path):
    add(tmp_path, RECORDS)
    before = _files(tmp_path)
    again = add(tmp_path, [RECORDS[0], RECORDS[0]])
    assert [o.added for o in again] == [False, False]
    assert _files(tmp_path) == before
    # a copy with different formatting and key order is still the same record
    data = json.loads(RECORDS[1].read_text())
    reformatted = tmp_path / "reformatted.json"
    reformatted.write_text(json.dumps(dict(reversed(list(data.items())))))
    (o,) = add(tmp_path, [reformatted])
    assert not o.added
    assert len(load(tmp_path)) == len(RECORDS)


def test_the_same_file_twice_in_one_call_is_stored_once(tmp_path):
    outcomes = add(tmp_path, [RECORDS[0], RECORDS[0]])
    assert [o.added for o in outcomes] == [True, False]
    assert len(_files(tmp_path)) == 1


def test_two_branches_merge_without_duplicates(tmp_path):
    base, ours, theirs = tmp_path / "base", tmp_path / "ours", tmp_path / "theirs"
    add(base, RECORDS[:1])
    shutil.copytree(base, ours)
    shutil.copytree(base, theirs)
    add(ours, RECORDS[1:3])
    add(theirs, RECORDS[2:])  # RECORDS[2] is added on both branches
    merged = tmp_path / "merged"
    shutil.copytree(ours, merged)
    for name, data in _files(theirs).items():  # a union of files, as a git merge makes it
        target = merged / name
        assert not target.exists() or target.read_bytes() == data, f"conflict at {name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    ids = [s.record.id for s in load(merged)]
    assert len(ids) == len(set(ids)) == len(RECORDS)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_merges_records_added_on_two_branches_without_conflicts(tmp_path):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                        "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
                       cwd=tmp_path, check=True, capture_output=True, text=True)

    results = tmp_path / "matrix" / "results"
    git("init", "-q")
    add(results, RECORDS[:1])
    git("add", "-A")
    git("commit", "-qm", "base")
    git("checkout", "-qb", "gpu-runner-a")
    add(results, RECORDS[1:3])
    git("add", "-A")
    git("commit", "-qm", "a")
    git("checkout", "-q", "main")
    git("checkout", "-qb", "gpu-runner-b")
    add(results, RECORDS[2:])
    git("add", "-A")
    git("commit", "-qm", "b")
    git("merge", "-q", "--no-edit", "gpu-runner-a")  # raises if git reports a conflict
    ids = [s.record.id for s in load(results)]
    assert len(ids) == len(set(ids)) == len(RECORDS)


def test_a_bad_file_among_good_ones_writes_nothing_and_names_every_problem(tmp_path):
    results = tmp_path / "results"
    inputs = [RECORDS[0], INVALID / "many-problems.json", RECORDS[1],
              INVALID / "truncated.json", tmp_path / "missing.json"]
    with pytest.raises(RecordError) as exc:
        add(results, inputs)
    assert not results.exists()
    err = exc.value
    assert err.exit_code == 1 and "nothing was written" in err.hint
    assert list(err.problems) == [str(inputs[1]), str(inputs[3]), str(inputs[4])]
    assert err.message.startswith("3 of 5 result file(s) invalid, 20 problem(s):\n")
    assert f"{INVALID / 'many-problems.json'}: $.status: 'ok' is not one of pass, fail" \
        in err.message
    assert f"{INVALID / 'truncated.json'}: $: not JSON: " in err.message
    assert f"{tmp_path / 'missing.json'}: $: no such file" in err.message


@pytest.mark.parametrize("kind", ["verify", "attempt"])
def test_a_different_file_at_the_same_name_is_refused_before_anything_is_written(tmp_path,
                                                                                  kind):
    paths = VERIFY if kind == "verify" else ATTEMPTS
    record, _ = parse_any(load_json(paths[0]))
    squatter = record_path(tmp_path, record)
    squatter.parent.mkdir(parents=True)
    squatter.write_text('{"edited": true}\n')
    with pytest.raises(DataError, match="already exists with different content") as exc:
        add(tmp_path, [paths[1], paths[0]])
    assert "git checkout" in exc.value.hint
    assert _files(tmp_path) == {squatter.relative_to(tmp_path).as_posix():
                                b'{"edited": true}\n'}


def test_no_files_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError):
        add(tmp_path, [])


def test_an_interrupted_write_leaves_neither_file_nor_temporary(tmp_path, monkeypatch):
    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(FilesystemError, match="disk full"):
        write_file(tmp_path / "a" / "r.json", b"{}\n", durable=True)
    assert not (tmp_path / "a").exists()  # nor the folder it created for it


def test_load_returns_validated_records_in_order(tmp_path):
    add(tmp_path, list(reversed(RECORDS)))
    (tmp_path / "README.md").write_text("notes\n")  # other files are not records
    stored = load(tmp_path)
    keys = [(s.record.combination, s.record.finished) for s in stored]
    assert keys == sorted(keys) and len(stored) == len(RECORDS)
    assert all(s.path == record_path(tmp_path, s.record) for s in stored)
    assert load(tmp_path / "nowhere") == []


def test_load_names_a_corrupt_committed_record(tmp_path):
    outcomes = add(tmp_path, RECORDS)
    broken = outcomes[1].path
    data = json.loads(broken.read_text())
    data["status"] = "passed"
    broken.write_text(json.dumps(data))
    with pytest.raises(RecordError) as exc:
        load(tmp_path)
    assert isinstance(exc.value, DataError)
    assert list(exc.value.problems) == [str(broken)]
    assert f"{broken}: $.status: 'passed' is not one of pass, fail" in exc.value.message
    assert "restore the files named from git" in exc.value.hint


def test_load_refuses_a_record_under_the_wrong_name(tmp_path):
    (o,) = add(tmp_path, RECORDS[:1])
    moved = o.path.with_name("20990101T000000Z-000000000000.json")
    o.path.rename(moved)
    with pytest.raises(DataError, match="stored under the wrong name; this record belongs at "):
        load(tmp_path)
    assert render(o.record) == moved.read_bytes()


def test_both_kinds_are_read_by_their_schema(tmp_path):
    for path in RECORDS:
        record, problems = read_record_file(path)
        assert problems == [] and record.kind == (
            "attempt" if path in ATTEMPTS else "verify")
    # a schema of neither kind is named, not guessed
    for schema, message in [("attempt/9", "$.schema: schema 'attempt/9' is newer than this "
                             "envgen reads ('attempt/1'); upgrade envgen"),
                            (2, "$.schema: schema 2 is newer than this envgen reads (1); "
                             "upgrade envgen"),
                            ("1", "$.schema: expected 1, got '1'")]:
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(load_json(ATTEMPTS[0]) | {"schema": schema}))
        assert [str(p) for p in read_record_file(bad)[1]] == [message]


def test_a_bad_attempt_among_good_records_of_both_kinds_writes_nothing(tmp_path):
    results = tmp_path / "results"
    inputs = [VERIFY[0], ATTEMPTS[0], INVALID / "attempt-inconsistent.json", ATTEMPTS[1]]
    with pytest.raises(RecordError) as exc:
        add(results, inputs)
    assert not results.exists()
    assert list(exc.value.problems) == [str(inputs[2])]
    assert exc.value.message.startswith("1 of 4 result file(s) invalid, 5 problem(s):\n")
    assert f"{inputs[2]}: $.build: must be null for a T1 (lock) attempt" in exc.value.message


def test_mixed_kinds_load_in_order_and_the_same_attempt_is_stored_once(tmp_path):
    outcomes = add(tmp_path, [*ATTEMPTS, *VERIFY, ATTEMPTS[0]])
    assert [o.added for o in outcomes] == [True] * len(RECORDS) + [False]
    stored = load(tmp_path)
    assert len(stored) == len(RECORDS)
    assert {s.record.kind for s in stored} == {"attempt", "verify"}
    keys = [(s.record.combination, s.record.finished_at) for s in stored]
    assert keys == sorted(keys)
    assert all(s.path == record_path(tmp_path, s.record) for s in stored)
    assert all(s.path.read_bytes() == render(s.record) for s in stored)


def test_load_names_a_corrupt_attempt_record(tmp_path):
    (o,) = add(tmp_path, [p for p in ATTEMPTS if p.stem == "ds-t1-lock-pass"])
    data = json.loads(o.path.read_text())
    data["status"] = "fail"  # edited by hand: the error line is missing now
    o.path.write_text(json.dumps(data))
    with pytest.raises(RecordError) as exc:
        load(tmp_path)
    assert f"{o.path}: $.error: must be the first error line (a non-empty string) when status " \
           "is 'fail'" in exc.value.message
