"""matrix/harvested/ on disk: interrupts during the commit are deferred, leftovers are removed
and reported, and every wrong shape of a harvested file is a DataError, not a traceback."""

from __future__ import annotations

import json
import os
import signal

import pytest
from support.mini_pypi import tree

from envgen.errors import DataError, Interrupted, rollback_notes
from envgen.harvest import snapshot
from envgen.harvest.update import UpdateOptions, update_matrix

NEW = {name: snapshot.dumps({"schema": 1, key: []}) for name, key in snapshot.FILES.items()}


def _old(matrix):
    (matrix / "harvested").mkdir(parents=True, exist_ok=True)
    for name, key in snapshot.FILES.items():
        doc = {"schema": 1, key: [], "generated": {"date": "old"}}
        (matrix / "harvested" / name).write_text(snapshot.dumps(doc))
    return tree(matrix)


@pytest.fixture
def sigterm_raises():
    """SIGTERM raises errors.Interrupted, as the CLI arranges."""

    def handler(signum, _frame):
        raise Interrupted(signum)

    saved = signal.signal(signal.SIGTERM, handler)
    yield
    signal.signal(signal.SIGTERM, saved)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_signal_during_the_commit_is_deferred_until_it_is_done(
    tmp_path, monkeypatch, sigterm_raises, signum
):
    matrix = tmp_path / "matrix"
    _old(matrix)
    real_exchange = snapshot.exchange

    def exchange_with_a_signal(a, b):  # the signal arrives in the middle of the commit
        os.kill(os.getpid(), signum)
        return real_exchange(a, b)

    monkeypatch.setattr(snapshot, "exchange", exchange_with_a_signal)
    with pytest.raises(KeyboardInterrupt) as err:
        snapshot.write(matrix, NEW)
    assert isinstance(err.value, Interrupted) == (signum == signal.SIGTERM)
    assert {p.name: p.read_text() for p in (matrix / "harvested").iterdir()} == NEW
    assert not list(matrix.glob(".harvested*"))
    assert rollback_notes(err.value) == [
        f"{matrix / 'harvested'} had been written completely before the interrupt"
    ]


def test_interrupt_before_the_commit_removes_the_staging_folder(tmp_path, monkeypatch):
    matrix = tmp_path / "matrix"
    before = _old(matrix)

    def interrupted(*_args):
        raise KeyboardInterrupt

    monkeypatch.setattr(snapshot, "fsync_dir", interrupted)  # after every file was written
    with pytest.raises(KeyboardInterrupt) as err:
        snapshot.write(matrix, NEW)
    staging = matrix / f".harvested.new-{os.getpid()}"
    assert rollback_notes(err.value) == [
        f"removed the partly written snapshot {staging}; {matrix / 'harvested'} is unchanged"
    ]
    assert tree(matrix) == before and not list(matrix.glob(".harvested*"))


def test_write_error_is_a_filesystem_error_and_leaves_no_debris(tmp_path, monkeypatch):
    from envgen.errors import FilesystemError

    matrix = tmp_path / "matrix"
    before = _old(matrix)

    def full(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(snapshot, "fsync_dir", full)
    with pytest.raises(FilesystemError, match="No space left on device") as err:
        snapshot.write(matrix, NEW)
    assert err.value.exit_code == 4 and "disk is full" in err.value.hint
    assert tree(matrix) == before and not list(matrix.glob(".harvested*"))


def _dead_pid() -> int:
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid -= 1


def test_recover_removes_dead_debris_reports_it_and_spares_live_writers(tmp_path):
    matrix = tmp_path / "matrix"
    _old(matrix)
    dead = matrix / f".harvested.new-{_dead_pid()}"
    live = matrix / f".harvested.new-{os.getppid()}"
    for path in (dead, live):
        path.mkdir()
        (path / "torch.json").write_text("{")
    assert snapshot.recover(matrix) == [dead]
    assert live.exists() and not dead.exists()


def test_recover_restores_the_old_snapshot_of_a_torn_fallback(tmp_path):
    matrix = tmp_path / "matrix"
    before = _old(matrix)
    (matrix / "harvested" / snapshot.COMPLETE).touch()
    os.rename(matrix / "harvested", matrix / ".harvested.old")  # killed between the renames
    assert snapshot.recover(matrix) == [matrix / ".harvested.old"]
    assert tree(matrix) == before


@pytest.mark.integration
def test_update_reports_the_debris_it_removed(committed, index_server, fast):
    from support.mini_pypi import add_wheel, torch_metadata

    debris = committed / f".harvested.new-{_dead_pid()}"
    debris.mkdir()
    add_wheel(index_server, "torch", "torch-2.5.2-cp311-cp311-manylinux1_x86_64.whl",
              torch_metadata("2.5.2"))
    lines: list[str] = []
    result = update_matrix(committed, UpdateOptions(write=True, **fast), progress=lines.append)
    assert result.written and not debris.exists()
    assert f"removed {debris}, left over by an interrupted earlier write" in lines


BAD_SHAPES = [
    (b"[]", "the file is a JSON list, not an object with a 'builds' list"),
    (b'{"schema": 1, "builds": {}}', "no 'builds' list"),
    (b'{"schema": 1, "builds": [1]}', "builds[0] is a JSON int, not an object"),
    (b'{"schema": 1, "builds": [{"version": "2.5.1"}]}', "builds[0] has no 'platform'"),
    (b'{"schema": 1, "builds": [', "invalid JSON"),
    (b"\xff\xfe\x00", "invalid JSON"),
]


@pytest.mark.integration
@pytest.mark.parametrize(("body", "reason"), BAD_SHAPES)
def test_malformed_harvested_file_is_a_data_error(mini_matrix, fast, body, reason):
    path = mini_matrix / "harvested" / "torch.json"
    path.write_bytes(body)
    before = tree(mini_matrix)
    with pytest.raises(DataError) as err:
        update_matrix(mini_matrix, UpdateOptions(write=True, **fast))
    assert err.value.message.startswith(f"{path}: ") and reason in err.value.message
    assert "git checkout" in err.value.hint
    assert tree(mini_matrix) == before


@pytest.mark.parametrize("body", [b"[]", b'"text"', b"\xff\xfe\x00", b"42"])
def test_facts_load_reports_a_harvested_file_that_is_not_an_object(matrix_copy, body):
    from envgen.facts import load_facts

    (matrix_copy / "harvested" / "torch.json").write_bytes(body)
    with pytest.raises(DataError) as err:
        load_facts(matrix_copy)
    assert "harvested/torch.json: " in err.value.message
    assert "is a JSON" in err.value.message or "not valid JSON" in err.value.message


def test_facts_load_json_array_message(matrix_copy):
    from envgen.facts import load_facts

    (matrix_copy / "harvested" / "cuda.json").write_text(json.dumps([{"cuda": "12.1"}]))
    with pytest.raises(DataError, match=r"harvested/cuda.json: is a JSON list, expected an "
                                        r"object with schema 1 and a 'toolkits' list"):
        load_facts(matrix_copy)
