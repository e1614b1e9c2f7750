"""`envgen table` for a terminal: the rows for a choice (--framework, --cuda, --gpu as the
page's selector), in a table that fits the width, values escaped."""

from __future__ import annotations

import pytest
from results_data import RECORDS

from envgen.cli.table_cmd import terminal_table
from envgen.errors import UsageError
from envgen.results.store import add, load_many
from envgen.results.table import make_table
from envgen.results.table_view import select


@pytest.fixture
def table(facts, tmp_path):
    add(tmp_path / "results", RECORDS)
    return make_table(facts, load_many([tmp_path / "results"]))


def test_filters_keep_the_policy_order(table, facts):
    ds = select(table, facts, framework="deepspeed")
    assert ds and all(r.framework == "deepspeed" for r in ds)
    assert ds == tuple(r for r in table.rows if r.framework == "deepspeed")
    assert ds[0].status == "known-good" and ds[-1].status == "known-bad"
    assert all(r.cuda.startswith("12.") for r in select(table, facts, cuda="12"))
    by_name = select(table, facts, framework="deepspeed", gpu="H100")
    assert by_name == select(table, facts, framework="deepspeed", gpu="sm_90")
    assert 0 < len(by_name) <= len(ds)
    with pytest.raises(UsageError):
        select(table, facts, gpu="Z999")


def test_terminal_table_fits_and_escapes(table):
    rows = table.rows
    text = terminal_table(rows, width=100)
    lines = text.splitlines()
    assert lines[0].split()[0] == "tier" and len(lines) == len(rows) + 3
    assert all(len(x) <= 100 for x in lines[:-1])
    assert "…" in text
    assert "\x1b" not in text and "\x1b[32m" in terminal_table(rows, 200, colour=True)
    assert terminal_table((), 80).startswith("No row fits")
