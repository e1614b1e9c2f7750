"""The checks values from outside pass through, and the guards in what envgen renders: hostile
values are refused (or quoted) before they reach a Dockerfile, a lock header or a program."""

from __future__ import annotations

import pytest

from envgen import validate
from envgen.config import check_config, setting
from envgen.errors import UsageError
from envgen.image.render import dockerfile_string


@pytest.mark.parametrize("ref", [
    "debian", "debian:12", "docker.io/library/debian:12", "local/debian:bookworm",
    "127.0.0.1:5000/envgen/deepspeed:0.19.8-torch2.15.0",
    "nvcr.io/nvidia/cuda:12.4.1-devel-ubuntu22.04",
    "debian@sha256:" + "a" * 64, "ghcr.io/acme/x:1@sha256:" + "b" * 64, "[::1]:5000/x:y",
])
def test_image_refs_accepted(ref):
    assert validate.image_ref(ref, "--base") == ref


@pytest.mark.parametrize("ref", [
    "debian:12\nRUN evil", "debian:12 AS evil", "--privileged", "library/UPPER", "debian:",
    "debian@sha256:abc", ":12", "a" * 600, "debian:12\r", "deb ian",
])
def test_image_refs_refused(ref):
    with pytest.raises(UsageError) as err:
        validate.image_ref(ref, "--base", "--base")
    assert err.value.source == "--base"


@pytest.mark.parametrize("value", ["x\ny", "x\x00", "x\x1b[2J", "x\u2028y", "x\x85"])
def test_control_characters_are_refused_everywhere(value):
    with pytest.raises(UsageError, match="control character"):
        validate.text(value, "FLAG", "FLAG")


@pytest.mark.parametrize("value, ok", [
    ("2026-11-01", True), ("2026-11-01T00:00:00Z", True), ("2026-11-01T12:30:00+02:00", True),
    ("yesterday", False), ("2026-13-01", False), ("2026-11-01T00:00:00", False), ("", False),
    ("1 week", False),
])
def test_dates(value, ok):
    if ok:
        assert validate.date(value, "--exclude-newer") == value
    else:
        with pytest.raises(UsageError):
            validate.date(value, "--exclude-newer")


@pytest.mark.parametrize("value, ok", [
    ("https://pypi.example/simple", True), ("http://127.0.0.1:8080/simple/", True),
    ("pypi.example/simple", False), ("ftp://x/simple", False), ("https:///simple", False),
    ("https://a b/simple", False), ("https://x/simple\n--trusted-host y", False),
])
def test_urls(value, ok):
    if ok:
        assert validate.url(value, "--index-url") == value
    else:
        with pytest.raises(UsageError):
            validate.url(value, "--index-url")


def test_names_that_could_be_options_are_refused():
    for bad in ("--privileged", "-x", "a b", ""):
        with pytest.raises(UsageError):
            validate.name(bad, "--network")
    assert validate.name("host", "--network") == "host"


def test_positive_numbers():
    assert validate.positive(2, "--timeout") == 2
    for bad in (0, -1, float("nan"), float("inf"), True, "3"):
        with pytest.raises(UsageError):
            validate.positive(bad, "--timeout")


def test_dockerfile_strings_are_escaped_or_refused():
    assert dockerfile_string('a "b" $HOME \\x') == '"a \\"b\\" \\$HOME \\\\x"'
    with pytest.raises(UsageError):
        dockerfile_string("a\nRUN evil")


def test_config_types_are_checked_with_file_and_key(tmp_path):
    path = tmp_path / "envgen.toml"
    for table, needle in (({"matrix-dir": 5}, "matrix-dir must be a string, not int"),
                          ({"channels": {"a": 1}}, "must be a list of strings"),
                          ({"engine": "podman"}, "is not one of sdk, buildkit"),
                          ({"index-url": "not a url"}, "contains whitespace"),
                          ({"defaults": {"python": 3.1}}, "must be a string, not float"),
                          ({"defaults": "x"}, "defaults must be a table"),
                          ({"base-image": "a\nb"}, "control character")):
        with pytest.raises(UsageError, match=needle) as err:
            check_config(path, table)
        assert err.value.source.startswith(f"{path}:")


def test_config_paths_are_relative_to_the_file(tmp_path):
    out = check_config(tmp_path / "envgen.toml", {"out": "locks", "ca-cert": ["a.pem", "b.pem"]})
    assert out["out"] == tmp_path / "locks"
    assert out["ca-cert"] == (tmp_path / "a.pem", tmp_path / "b.pem")


def test_setting_names_where_a_value_came_from(tmp_path):
    cfg = tmp_path / "envgen.toml"
    assert setting("registry", None, {}, cfg, {"ENVGEN_REGISTRY": "ghcr.io/acme"}) == (
        "ghcr.io/acme", "ENVGEN_REGISTRY")
    with pytest.raises(UsageError) as err:
        setting("base-image", None, {}, cfg, {"ENVGEN_BASE_IMAGE": "x\ny"})
    assert err.value.source == "ENVGEN_BASE_IMAGE"
    with pytest.raises(UsageError) as err:
        setting("base-image", "x y", {}, cfg, {})
    assert err.value.source == "--base"
    assert setting("out", None, {}, cfg, {}) == (None, None)
    assert setting("channels", None, {}, cfg, {"ENVGEN_CHANNELS": "a b"}) == (
        ("a", "b"), "ENVGEN_CHANNELS")


@pytest.mark.parametrize("text, table", [
    ('[tool.envgen]\nout = "locks"\n', {"out": "locks"}),
    ('[tool . "envgen"]\nout = "locks"\n', {"out": "locks"}),
    ('[tool.envgen.defaults]\nos = "debian-12"\n', {"defaults": {"os": "debian-12"}}),
    ('tool.envgen.out = "locks"\n', {"out": "locks"}),
    ('"tool"."envgen".out = "locks"\n', {"out": "locks"}),
    ('[tool]\nenvgen = { out = "locks" }\n', {"out": "locks"}),
    ('[tool]\nenvgen.out = "locks"\n', {"out": "locks"}),
    ('[project]\nname = "envgen"\n[project.scripts]\nenvgen = "envgen.cli:entrypoint"\n', None),
    ('[tool.ruff]\nline-length = 99\n', None),
])
def test_pyproject_tool_tables_are_found_in_every_toml_form(tmp_path, text, table):
    """A pyproject.toml is parsed only when it can hold [tool.envgen] (most do not: the TOML
    reader is not even imported); every TOML spelling of the table is still found."""
    from envgen.config import find_config, may_hold_tool_table

    (tmp_path / "pyproject.toml").write_text(text)
    path, config = find_config(tmp_path)
    assert path == (tmp_path.resolve() / "pyproject.toml" if table else None)
    assert set(config) == set(table or {})
    if table:
        assert may_hold_tool_table(text.encode())


def test_a_pyproject_without_envgen_is_not_parsed(tmp_path):
    """Someone else's broken pyproject.toml does not stop envgen; an envgen.toml still must
    be valid."""
    from envgen.config import find_config

    (tmp_path / "pyproject.toml").write_bytes(b"[project\nname = \xff\n")
    assert find_config(tmp_path) == (None, {})
    (tmp_path / "pyproject.toml").write_text("[tool.envgen\n")
    with pytest.raises(UsageError, match="is not valid TOML"):
        find_config(tmp_path)
    (tmp_path / "pyproject.toml").unlink()
    (tmp_path / "envgen.toml").write_text("out = \n")
    with pytest.raises(UsageError, match="is not valid TOML"):
        find_config(tmp_path)
