from __future__ import annotations

import json

import pytest
from support.mini_pypi import tree

from envgen.cli.main import main

pytestmark = pytest.mark.integration


def _args(matrix, fast, *extra):
    return ["matrix", "update", "--matrix-dir", str(matrix), "--cache-dir", str(fast["cache_dir"]),
            "--timeout", "2", "--retries", "1", "--jobs", "3", *extra]


def test_cli_dry_run_then_write_then_noop(mini_matrix, fast, capsys):
    before = tree(mini_matrix)
    assert main(_args(mini_matrix, fast)) == 0
    out, err = capsys.readouterr()
    assert "changes; run with --write to write them to" in out and "torch.json: +" in out
    assert "torch (pypi): metadata files:" in err
    assert tree(mini_matrix) == before
    assert main(_args(mini_matrix, fast, "--write")) == 0
    assert (mini_matrix / "harvested" / "torch.json").exists()
    capsys.readouterr()
    assert main(_args(mini_matrix, fast, "--json")) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["changes"] == 0 and payload["written"] is False


def test_cli_network_error_exit_code(mini_matrix, index_server, fast, capsys):
    index_server.state.faults["/simple/torch/"] = ["500"] * 5
    before = tree(mini_matrix)
    assert main(_args(mini_matrix, fast, "--write")) == 4
    err = capsys.readouterr().err
    assert f"GET {index_server.url}/simple/torch/ failed after 2 attempts: HTTP 500" in err
    assert "hint:" in err and "--offline" in err
    assert tree(mini_matrix) == before


def test_cli_help_has_examples(capsys):
    with pytest.raises(SystemExit):
        main(["matrix", "update", "--help"])
    out = capsys.readouterr().out
    assert "--all-indexes" in out and "envgen matrix update --write" in out and "--ca-cert" in out
