"""The lock files' YAML writer (envgen.lock.yaml, PyYAML underneath): the bytes are pinned
(golden files written by the hand-written writer it replaced, so every lock file and its hash
stay the same), libyaml's and the pure-Python emitter agree, and PyYAML reads the text back."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from envgen.lock.yaml import dump, dumper, plain

GOLDEN = Path(__file__).parent / "golden"
PIP = ["--index-url https://pypi.org/simple",
       "--extra-index-url https://download.pytorch.org/whl/cu128", "torch==2.9.0",
       "deepspeed==0.18.2"]
ENVIRONMENT = {
    "name": "deepspeed-0.18.2-torch2.9.0-cu128-py3.11-debian12-x86_64",
    "channels": ["https://conda.anaconda.org/conda-forge", "nvidia/label/cuda-11.8.0"],
    "dependencies": ["python 3.11.*", "cuda-version 12.8.*", "cuda-nvcc", "gxx 14.*", "pip",
                     {"pip": PIP}],
    "platforms": ["linux-64"],
}


def _package(name, version, manager, url, deps=None, **hashes):
    return {"name": name, "version": version, "manager": manager, "platform": "linux-64",
            "dependencies": deps or {}, "url": url, "hash": hashes, "category": "main",
            "optional": False}


CONDA_LOCK = {
    "version": 1,
    "metadata": {
        "content_hash": {"linux-64": "78" * 32},
        "channels": [{"url": "https://conda.anaconda.org/conda-forge", "used_env_vars": []}],
        "platforms": ["linux-64"],
        "sources": ["environment.yml"],
        "custom_metadata": {
            "envgen_combination": "deepspeed-0.18.2-torch2.9.0-cu128-py3.11-debian12-x86_64",
            "envgen_lock_hash": "sha256:" + "30" * 32},
    },
    "package": [
        _package("cuda-nvcc", "12.8.93", "conda",
                 "https://conda.anaconda.org/conda-forge/linux-64/cuda-nvcc-12.8.93-0.conda",
                 {"cuda-version": ">=12.8,<12.9", "__glibc": ">=2.17,<3.0.a0", "gcc": "14.*",
                  "libgcc": "*"}, md5="31" * 16, sha256="a0" * 32),
        _package("python", "3.10", "conda", "https://x/python-3.10-0_cpython.conda",
                 md5="f1" * 16, sha256="d1" * 32),
        _package("torch", "2.9.0+cu128", "pip", "https://download.pytorch.org/whl/cu128/"
                 "torch-2.9.0%2Bcu128-cp311-cp311-manylinux_2_28_x86_64.whl", sha256="cf" * 32),
        _package("pyyaml", "6.0.3", "pip",
                 "https://files.pythonhosted.org/packages/a/b/PyYAML-6.0.3.tar.gz",
                 sha256="00" * 32),
    ],
}
CASES = [(ENVIRONMENT, "yaml-writer.environment.yml"), (CONDA_LOCK, "yaml-writer.conda-lock.yml")]


@pytest.mark.parametrize(("doc", "golden"), CASES)
def test_bytes_are_the_hand_written_writers(doc, golden):
    text = dump(doc)
    assert text == (GOLDEN / golden).read_text(encoding="utf-8")
    assert yaml.safe_load(text) == doc


@pytest.mark.parametrize(("doc", "golden"), CASES)
def test_libyaml_and_pure_python_emitters_agree(doc, golden):
    pure = yaml.dump(doc, Dumper=dumper(yaml.SafeDumper), sort_keys=False,
                     default_flow_style=False, allow_unicode=True, width=1 << 30)
    assert pure == dump(doc)


@pytest.mark.parametrize(("text", "is_plain"), [
    ("torch==2.9.0", True), ("2.9.0+cu128", True), ("14.*", True), ("linux-64", True),
    ("https://x/y", True), ("2024-01-02", True),  # plain, as envgen has always written it
    ("2.5.1", False), ("3.10", False), ("1e5", False), ("0x1F", False), ("yes", False),
    ("*", False), (">=3.8", False), ("a: b", False), ("a #b", False), ("", False),
    ("--index-url https://x", False), ("%2B", False), ("é", False),
])
def test_quoting_rule(text, is_plain):
    assert plain(text) is is_plain
    assert (dump({"k": text}) == f"k: {text}\n") is is_plain


def test_long_and_unicode_strings_stay_on_one_line():
    doc = {"k": "x " * 200, "u": "café ü"}
    assert dump(doc).count("\n") == 2 and yaml.safe_load(dump(doc)) == doc
