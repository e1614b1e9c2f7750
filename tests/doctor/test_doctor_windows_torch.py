"""PyPI's Windows torch is a CPU-only build (curated/torch.toml [[pypi_windows]], read from each
release's win_amd64 wheel's torch/version.py): a bare torch version on Windows (pip from PyPI,
no local label, no conda torch) is judged as that build, so torch_cpu_only explains "Torch not
compiled with CUDA enabled" with the pip command of the release's CUDA build on PyTorch's index,
and the doctor asks for torch.version.cuda, since it was assumed. Runs on the real matrix."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

from envgen.doctor.catalog import load_catalog
from envgen.doctor.judge import judge, pypi_windows_build
from envgen.doctor.reports import parse_report
from envgen.doctor.snapshot import Snapshot
from envgen.facts import load_facts
from envgen.facts.sources import load_sources

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "matrix"


@pytest.fixture(scope="module")
def real():
    return load_facts(MATRIX), load_catalog(MATRIX), {
        i.name: i.url for i in load_sources(MATRIX).indexes}


def _judge(real, text: str):
    facts, catalog, urls = real
    return judge(parse_report(text).snapshot, facts, catalog, origin="report", index_urls=urls)


def test_every_pypi_windows_row_is_a_cpu_build_read_from_its_wheel(real):
    rows = tomllib.loads((MATRIX / "curated" / "torch.toml").read_text())["pypi_windows"]
    assert [r["torch"] for r in rows if not r["wheels"]] == [
        "1.0.0", "1.0.1", "1.1.0", "1.2.0", "1.3.0", "1.3.1", "1.4.0", "1.5.0", "1.5.1", "1.6.0"]
    with_wheels = [r for r in rows if r["wheels"]]
    assert len(with_wheels) == 42 and with_wheels[0]["torch"] == "1.7.0"
    for r in with_wheels:
        assert "cuda" not in r and r["version"] == r["torch"] + "+cpu"
        assert r["source"].startswith("https://files.pythonhosted.org/packages/")
        assert r["source"].endswith("-win_amd64.whl") and f"torch-{r['torch']}-" in r["source"]
    facts = real[0]
    assert {(b.platform, b.cuda, b.index) for b in facts.windows_builds} == {
        ("windows-x86_64", None, "pypi")}
    assert not {b.platform for b in facts.torch_builds} & {"windows-x86_64"}  # no candidates


def test_a_pip_install_on_windows_is_judged_as_pypis_cpu_build(real):
    """opendatalab/MinerU#240 (https://github.com/opendatalab/MinerU/issues/240): the issue's
    title is the error; the reporter's pip run in a Windows shell installs PyPI's (a mirror's)
    win_amd64 wheel of torch 2.3.1."""
    d = _judge(real, "(MinerU_GPU) C:\\Users\\tu_ha>pip install torch==2.3.1 torchvision==0.18.1\n"
               "Looking in indexes: https://mirrors.aliyun.com/pypi/simple/\n"
               "Collecting torch==2.3.1\n"
               "  Using cached https://mirrors.aliyun.com/pypi/packages/85/fc/ee5bb50eff313149"
               "657f173b003649677e27fa3aaae1ecc806add37f017c/torch-2.3.1-cp310-cp310-win_amd64"
               ".whl (159.8 MB)\n"
               "AssertionError: Torch not compiled with CUDA enabled\n")
    [found] = [f for f in d.findings if f.kind == "torch_cpu_only"]
    assert "PyPI's Windows wheels of torch 2.3.1" in found.summary
    assert found.evidence["assumed"] == "PyPI's win_amd64 build"
    # PyPI's Linux build of 2.3.1 is CUDA 12.1: its variant on PyTorch's index comes first
    assert found.command == ("python -m pip install --force-reinstall torch==2.3.1+cu121 "
                             "--index-url https://download.pytorch.org/whl/cu121")
    assert "torch-2.3.1-cp310-cp310-win_amd64.whl" in found.source
    [need] = [n for n in d.needs if n.fact == "torch_cuda"]
    assert "PyPI's Windows build of 2.3.1 (CPU-only)" in need.why
    assert "torch.version.cuda" in need.how
    assert d.snapshot.torch_cuda is not None  # the diagnosis keeps the report as stated


def test_cuda_unavailable_with_a_gpu_is_enough(real):
    """No "not compiled" line: CUDA unavailable on a machine with an NVIDIA GPU."""
    facts, catalog, urls = real
    d = judge(Snapshot.from_dict({"torch": "2.1.0", "platform": "windows",
                                  "gpus": [{"name": "NVIDIA GeForce RTX 3080"}],
                                  "errors": {"cuda_unavailable": "Is CUDA available: False"}}),
              facts, catalog, index_urls=urls)
    [found] = [f for f in d.findings if f.kind == "torch_cpu_only"]
    assert found.severity == "error"
    assert found.command.endswith("torch==2.1.0+cu121 --index-url "
                                  "https://download.pytorch.org/whl/cu121")


def test_conda_torch_or_a_local_label_is_not_assumed(real):
    """pytorch/pytorch#122924 (https://github.com/pytorch/pytorch/issues/122924): Windows 11,
    'PyTorch version: 2.2.2' (PyPI's Windows wheel says 2.2.2+cpu) with conda's cudatoolkit:
    not PyPI's build, so nothing is assumed. Its "CUDA used to build PyTorch: Could not collect"
    below a torch version is torch.version.cuda None: a CPU build that collect_env itself states,
    so torch_cpu_only stands on that line, with nothing assumed."""
    text = ("PyTorch version: 2.2.2\nCUDA used to build PyTorch: Could not collect\n"
            "OS: Microsoft Windows 11 Education\n"
            "Python platform: Windows-10-10.0.22631-SP0\nIs CUDA available: False\n"
            "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4080 Laptop GPU\n"
            "Nvidia driver version: 551.86\n\nVersions of relevant libraries:\n"
            "[pip3] numpy==1.26.4\n[pip3] torch==2.2.2\n"
            "[conda] cudatoolkit               11.8.0\n")
    d = _judge(real, text)
    assert [f.evidence.get("assumed") for f in d.findings if f.kind == "torch_cpu_only"] == [None]
    assert not [n for n in d.needs if "PyPI's Windows build" in n.why]
    facts = real[0]
    for snapshot in ({"torch": "2.3.1+cu121", "platform": "windows"},
                     {"torch": "2.3.1", "platform": "linux-x86_64"},
                     {"torch": "1.6.0", "platform": "windows"},  # no win_amd64 wheel on PyPI
                     {"torch": "2.3.1", "torch_cuda": "12.1", "platform": "windows"}):
        assert pypi_windows_build(Snapshot.from_dict(snapshot), facts) is None, snapshot
    assert pypi_windows_build(Snapshot.from_dict(
        {"torch": "2.3.1", "os": "Windows 10"}), facts).version == "2.3.1"
