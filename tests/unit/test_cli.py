from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.run import in_process

from envgen import __version__


@pytest.fixture
def run(fixture_matrix, capsys, monkeypatch, tmp_path):
    return in_process(fixture_matrix, capsys, monkeypatch, tmp_path)


def test_resolve_table_explains_choice(run):
    code, out, err = run("resolve", "--framework", "deepspeed", "--cuda", "12.1", "--limit", "2")
    assert code == 0, err
    assert "Best match for --framework deepspeed --cuda 12.1:" in out
    # each line says what decided it: the flag, or the ranking rule among the alternatives
    assert "  cuda       12.1                   --cuda 12.1; " in out
    assert "  nvcc       12.1.105               nvcc 12.1 (nvidia-cuda-nvcc-cu12): the same " \
           "minor as torch's CUDA" in out
    assert "  python     3.12                   policy.toml python_preference" in out
    assert "id: deepspeed-0.18.2-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64" in out
    rows = [line for line in out.splitlines() if line[:1].isdigit()]
    assert len(rows) == 2


def test_resolve_json_has_contract_keys(run):
    code, out, _ = run("resolve", "--framework", "megatron-core", "--json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"request", "policy", "why", "combinations", "torch_builds"}
    assert [d["axis"] for d in doc["why"]][:3] == ["framework", "torch", "cuda"]
    data = doc["combinations"]
    assert isinstance(data, list) and len(data) == 10
    need = {"id", "os", "python", "cuda", "torch", "nccl", "framework", "framework_version"}
    assert need <= set(data[0])
    assert data[0]["framework"] == "megatron-core"


def test_resolve_says_a_pinned_axis_was_asked_for(run):
    """The explanation names the flag that decided an axis, never a ranking it did not use."""
    code, out, err = run("resolve", "--torch", "2.5", "--python", "3.10", "--limit", "1")
    assert code == 0, err
    python = next(line for line in out.splitlines() if line.startswith("  python "))
    assert python.split()[-2:] == ["--python", "3.10"] and "policy" not in python
    torch = next(line for line in out.splitlines() if line.startswith("  torch "))
    assert "--torch 2.5" in torch


def test_json_flag_before_subcommand_also_works(run):
    code, out, _ = run("--json", "resolve", "--framework", "colossalai", "--limit", "1")
    assert code == 0 and json.loads(out)["combinations"][0]["torch"] == "2.5.1"


def test_infeasible_exits_3_with_explanation(run):
    code, out, err = run("resolve", "--framework", "megatron-core", "--python", "3.9")
    assert code == 3 and out == ""
    assert "No combination satisfies: --framework megatron-core --python 3.9" in err
    assert "framework-python" in err and "Nearest feasible:" in err
    assert "without --python: python 3.9 → 3.12" in err
    assert "envgen: error: no combination satisfies" in err


def test_infeasible_json(run):
    code, out, _ = run("resolve", "--framework", "deepspeed", "--cuda", "10.2", "--json")
    assert code == 3
    error = json.loads(out)["error"]
    assert error["kind"] == "infeasible" and error["fix"] and error["message"]
    data = error
    assert "no torch build for CUDA 10.2" in data["explanation"]["no_candidates"][0]
    assert data["explanation"]["nearest"][0]["relaxed"] == ["cuda"]


def test_usage_error_did_you_mean(run):
    code, _, err = run("resolve", "--framework", "colossal")
    assert code == 2
    assert "unknown framework 'colossal'" in err and "did you mean 'colossalai'" in err


def test_argparse_errors_exit_2_with_hint(run):
    code, out, err = run("resolve", "--limit", "many")
    assert code == 2 and out == ""
    assert "usage: envgen resolve" in err and "invalid int value: 'many'" in err
    assert "hint: run `envgen resolve --help`" in err
    code, out, _ = run("resolve", "--limit", "many", "--json")
    assert code == 2 and json.loads(out)["error"] == {
        "kind": "usage", "message": "argument --limit: invalid int value: 'many'",
        "fix": "run `envgen resolve --help` for the options", "source": "--limit"}


def test_matrix_show_json_torch_build_keys(run):
    code, out, _ = run("matrix", "show", "--kind", "torch", "--cuda", "12.4", "--json")
    assert code == 0
    builds = json.loads(out)["torch_builds"]
    assert builds and all(b["cuda"] == "12.4" for b in builds)
    assert {"version", "cuda", "python", "nccl", "glibc"} <= set(builds[0])


def test_matrix_show_summary_and_tables(run):
    code, out, _ = run("matrix", "show")
    assert code == 0 and "torch builds" in out and "CUDA toolkits    6" in out
    for kind, needle in (("torch", "2.5.1+cu121"), ("frameworks", "colossalai"),
                         ("cuda", "nvidia-cuda-nvcc-cu12 12.1.105"), ("os", "ubuntu-24.04")):
        code, out, _ = run("matrix", "show", "--kind", kind)
        assert code == 0 and needle in out


def test_config_defaults_apply_and_flags_win(run, tmp_path):
    (tmp_path / "envgen.toml").write_text('[defaults]\nos = "debian-12"\npython = "3.11"\n')
    _, out, _ = run("resolve", "--framework", "deepspeed", "--json", "--limit", "1")
    assert json.loads(out)["combinations"][0]["os"] == "debian-12"
    assert json.loads(out)["combinations"][0]["python"] == "3.11"
    _, out, _ = run("resolve", "--framework", "deepspeed", "--os", "ubuntu-24.04", "--json")
    assert json.loads(out)["combinations"][0]["os"] == "ubuntu-24.04"


def test_bad_config_is_a_usage_error(run, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.envgen]\nmatrix_dir = "x"\n')
    code, _, err = run("resolve")
    assert code == 2 and "unknown envgen setting(s): matrix_dir" in err and "matrix-dir" in err


def test_bad_matrix_dir_exit_1(run, tmp_path):
    code, _, err = run("--matrix-dir", str(tmp_path), "resolve")
    assert code == 1 and "no matrix data at" in err and "hint:" in err


def test_console_script_version_and_help():
    out = subprocess.run([sys.executable, "-m", "envgen", "--version"], capture_output=True,
                         text=True, check=True).stdout
    assert out.splitlines()[0] == f"envgen {__version__}"
    assert out.splitlines()[1].startswith("data snapshot ")
    helptext = subprocess.run([sys.executable, "-m", "envgen", "resolve", "--help"],
                              capture_output=True, text=True, check=True).stdout
    assert "examples:" in helptext and "--gpu-arch" in helptext and "Ranking:" in helptext


def test_closed_pipe_is_not_an_error(fixture_matrix):
    import os

    env = {**os.environ, "ENVGEN_MATRIX_DIR": str(fixture_matrix)}
    proc = subprocess.run(f"{sys.executable} -m envgen resolve --json --limit 0 | head -c 10",
                          shell=True, capture_output=True, text=True, env=env, check=True)
    assert proc.stdout.startswith("{") and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args, code", [
    (("resolve", "--framework", "deepspeed", "--limit", "0", "--json"), 0),
    (("resolve", "--limit", "many"), 2),
    (("resolve", "--framework", "deepspeed", "--cuda", "10.2", "--json"), 3),
])
def test_the_process_exits_with_the_documented_code(fixture_matrix, args, code):
    """The console entry as a process: the interpreter's normal exit gives the command's
    code (docs/errors.md), with all its output written."""
    import os

    env = {**os.environ, "ENVGEN_MATRIX_DIR": str(fixture_matrix)}
    proc = subprocess.run([sys.executable, "-m", "envgen", *args], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == code, proc.stderr
    if "--json" in args:
        json.loads(proc.stdout)  # complete, not cut short
    assert "Traceback" not in proc.stderr


def test_matrix_show_unknown_framework_did_you_mean(run):
    code, _, err = run("matrix", "show", "--kind", "frameworks", "--framework", "deepseed")
    assert code == 2 and "did you mean 'deepspeed'" in err


def test_config_cache_dir_reaches_matrix_update(run, tmp_path, matrix_copy):
    import shutil
    from pathlib import Path

    shutil.copy(Path(__file__).parents[2] / "matrix" / "sources.toml", matrix_copy)
    (tmp_path / "envgen.toml").write_text(f'matrix-dir = "{matrix_copy}"\ncache-dir = "cachex"\n')
    before = {p: p.read_bytes() for p in matrix_copy.rglob("*") if p.is_file()}
    code, _, err = run("matrix", "update", "--offline")
    assert code == 4
    assert f"is not in the cache at {tmp_path / 'cachex'}" in err
    assert {p: p.read_bytes() for p in matrix_copy.rglob("*") if p.is_file()} == before


def test_config_matrix_dir_wins_over_environment(run, tmp_path, monkeypatch, fixture_matrix):
    monkeypatch.setenv("ENVGEN_MATRIX_DIR", str(tmp_path / "nowhere"))
    (tmp_path / "envgen.toml").write_text(f'matrix-dir = "{fixture_matrix}"\n')
    code, out, _ = run("matrix", "show")
    assert code == 0 and "CUDA toolkits    6" in out


def test_setting_precedence_flag_config_env(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from envgen.cli.context import Context

    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "envgen.toml"
    ctx = Context(matrix_dir=tmp_path, config={"registry": "cfg.example",
                                               "ca-cert": (tmp_path / "a.pem",)},
                  config_path=cfg)
    monkeypatch.setenv("ENVGEN_REGISTRY", "env.example")
    monkeypatch.setenv("ENVGEN_CA_CERT", "x.pem y.pem")
    monkeypatch.setenv("ENVGEN_ENGINE", "buildkit")
    args = SimpleNamespace(registry=None, ca_cert=None, engine=None)
    assert ctx.setting(args, "registry") == "cfg.example"
    assert ctx.source("registry") == f"{cfg}:registry"
    assert ctx.setting(args, "ca-cert") == (tmp_path / "a.pem",)
    assert ctx.setting(args, "engine") == "buildkit" and ctx.source("engine") == "ENVGEN_ENGINE"
    args.registry = "flag.example"
    assert ctx.setting(args, "registry") == "flag.example"
    assert ctx.source("registry") == "--registry"
    ctx.config.clear()
    assert ctx.setting(args, "ca-cert") == (tmp_path / "x.pem", tmp_path / "y.pem")
    assert ctx.source("ca-cert") == "ENVGEN_CA_CERT"


def test_image_settings_are_known_config_keys(run, tmp_path):
    (tmp_path / "envgen.toml").write_text('registry = "ghcr.io/acme"\nengine = "buildkit"\n'
                                          'base-image = "debian:12"\ndocker-cli = "docker"\n')
    code, _out, err = run("resolve", "--framework", "deepspeed")
    assert code == 0, err
    (tmp_path / "envgen.toml").write_text('registy = "typo"\n')
    code, _out, err = run("resolve", "--framework", "deepspeed")
    assert code == 2 and "unknown envgen setting(s): registy" in err


def test_verify_unknown_framework_is_a_usage_error(run):
    code, out, err = run("verify", "ops", "--framework", "megatron")
    assert code == 2 and out == ""
    assert "envgen has no checks for framework 'megatron'" in err
    assert "use one of: colossalai, deepspeed, megatron-core" in err


def test_verify_record_needs_a_lock(run, tmp_path):
    code, _, err = run("verify", "all", "--framework", "deepspeed", "--record",
                       str(tmp_path / "r.json"))
    assert code == 2 and "--record needs --lock DIR" in err
    assert not (tmp_path / "r.json").exists()
