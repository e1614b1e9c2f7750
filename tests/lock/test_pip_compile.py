"""The pip step: uv's PEP 751 output read with packaging.pylock, one uv run per lock (a
glibc newer than uv knows is clamped from uv's own refusal), against the loopback index of real
wheels (tests/support/lock_env.py)."""

from __future__ import annotations

import sys

import pytest

from envgen.errors import EnvgenError
from envgen.lock import pip_compile
from envgen.lock.pip_compile import compile_pip, parse_pylock

HOST = f"{sys.version_info.major}.{sys.version_info.minor}"
HEAD = 'lock-version = "1.0"\ncreated-by = "uv"\n'


def test_a_pep_751_lock_is_read_with_packaging():
    text = HEAD + """
[[packages]]
name = "torch"
version = "2.9.0+cu128"
marker = "sys_platform == 'linux'"
wheels = [
  { url = "https://x/torch-2.9.0%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl", upload-time = 2024-10-29T16:00:00Z, hashes = { sha256 = "aa" } },
  { url = "https://x/torch-2.9.0%2Bcu128-cp312-cp312-manylinux_2_17_x86_64.whl", hashes = { sha256 = "bb" } },
]
[[packages]]
name = "a"
version = "2.0"
sdist = { url = "https://x/a-2.0.tar.gz", hashes = { sha256 = "22" } }
"""  # noqa: E501 - uv writes each wheel on one line
    a, torch = parse_pylock(text)
    assert (a.name, a.version, a.hashes, a.sdist.filename) == ("a", "2.0", ("22",), "a-2.0.tar.gz")
    assert torch.version == "2.9.0+cu128" and torch.hashes == ("aa", "bb")
    assert [w.filename for w in torch.wheels] == [
        "torch-2.9.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torch-2.9.0+cu128-cp312-cp312-manylinux_2_17_x86_64.whl"]
    assert torch.primary("3.12", "x86_64-manylinux_2_35").sha256 == "aa"  # the newest tag
    assert torch.primary("3.12", "x86_64-manylinux_2_27").sha256 == "bb"


@pytest.mark.parametrize(("text", "message"), [
    (HEAD + '[[packages]]\nname = "a"\nversion = "1"\n'
     'wheels = [{ url = "https://x/a-1-py3-none-any.whl" }]\n',
     "the index gave no sha256 for https://x/a-1-py3-none-any.whl"),
    (HEAD + '[[packages]]\nname = "a"\nversion = "1"\n'
     'wheels = [{ url = "https://x/a-1-py3-none-any.whl", hashes = { md5 = "1" } }]\n',
     "the index gave no sha256"),
    (HEAD + '[[packages]]\nname = "a"\nversion = "1"\n'
     'vcs = { type = "git", url = "https://x/a.git", commit-id = "abc" }\n',
     "uv locked a without a downloadable file (https://x/a.git)"),
    ("lock-version = ", "not TOML"),
    ('lock-version = "2.0"\ncreated-by = "uv"\n', "envgen cannot read"),
])
def test_what_envgen_cannot_lock_is_named(text, message):
    with pytest.raises(EnvgenError, match=message.replace(".", r"\.").replace("(", r"\(")
                       .replace(")", r"\)")):
        parse_pylock(text)


def test_the_pip_step_runs_uv_once_against_the_index(wheel_index, tmp_path, monkeypatch):
    _, url = wheel_index
    monkeypatch.setattr(pip_compile, "uv_platforms", lambda: pytest.fail("uv --help was run"))
    runs = []
    real = pip_compile.run  # envgen.proc.run: every program envgen starts goes through it
    monkeypatch.setattr(pip_compile, "run", lambda cmd, **kw: runs.append(cmd) or real(cmd, **kw))
    found = compile_pip(("deepspeed==0.18.2", "torch==2.9.0"), python_version=HOST,
                        python_platform="x86_64-manylinux_2_28", index_url=url,
                        extra_index_urls=(), cache_dir=tmp_path / "cache")
    assert len(runs) == 1
    names = {p.name: p.version for p in found}
    assert names["deepspeed"] == "0.18.2" and names["torch"] == "2.9.0"
    assert {"filelock", "ninja", "packaging", "nvidia-nccl-cu12"} <= set(names)
    assert names["packaging"] == "24.2"  # 99.0 needs Python >= 3.99
    torch = next(p for p in found if p.name == "torch")
    assert torch.primary(HOST, "x86_64-manylinux_2_28").url.startswith(url.rsplit("/", 1)[0])


def test_a_glibc_newer_than_uv_knows_is_clamped_from_uvs_own_list(wheel_index, tmp_path):
    _, url = wheel_index
    said: list[str] = []
    found = compile_pip(("filelock",), python_version=HOST,
                        python_platform="x86_64-manylinux_2_99", index_url=url,
                        extra_index_urls=(), cache_dir=tmp_path / "cache", progress=said.append)
    assert [p.name for p in found] == ["filelock"]
    assert any("uv knows manylinux tags up to x86_64-manylinux_2_" in s for s in said)
