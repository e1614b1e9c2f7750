"""The formats people paste besides the tools' own reports (issue 38 part 2): prose and compact
versions, the issue title, install commands, paths, the REPL banner, bare command outputs,
Windows signs, old collect_env lines. Each test runs on a real report's text: the dev set of
tests/doctor/corpus/ (named by file), the lines issue 38 quotes, or tests/fixtures/reports/."""

from __future__ import annotations

from pathlib import Path

import pytest

from envgen.doctor.images import load_images
from envgen.doctor.reports import describe, parse_report

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus" / "reports"
FIXTURES = HERE.parent / "fixtures" / "reports"
SHIPPED = HERE.parents[1] / "matrix"


def facts(text: str) -> dict:
    return parse_report(text).snapshot.to_dict()


def corpus(name: str) -> dict:
    return facts((CORPUS / name).read_text(encoding="utf-8"))


def formats_of(text: str, fact: str) -> list[str]:
    return [e.format for e in parse_report(text).explain if e.fact == fact and e.kept]


# --- prose and compact versions -------------------------------------------------------------

def test_compact_versions_colossalai_1390() -> None:
    """hpcaitech/ColossalAI#1390: "colossalai-0.1.8 / torch1.8cu10.1 / python3.8", and the
    title "A conflict with pytorch1.8.1"."""
    doc = corpus("ColossalAI-1390.txt")
    assert doc["torch"] == "1.8.1" and doc["torch_cuda"] == "10.1" and doc["python"] == "3.8"
    assert doc["frameworks"] == {"colossalai": "0.1.8"}


def test_prose_issue_quote() -> None:
    """The line issue 38 quotes: "Running Pytorch 1.70, CUDA 10.1, python=3.6.9"."""
    report = parse_report("Running Pytorch 1.70, CUDA 10.1, python=3.6.9")
    assert report.snapshot.to_dict() == {"schema": 1, "torch": "1.7.0", "python": "3.6.9"}
    torch = next(e for e in report.explain if e.fact == "torch")
    assert "1.70" in torch.note  # read as 1.7.0, and says so
    cuda = next(e for e in report.explain if e.fact == "cuda")
    assert cuda.value == "10.1" and not cuda.kept  # which CUDA: not said
    assert report.recognised


def test_lines_of_name_and_version_apex_499() -> None:
    """NVIDIA/apex#499: "ubuntu 16.04 / python 3.7 / pytorch 0.4.1 / GPU V100 / cuda 9.0" on
    lines of their own are prose, not a pip list; the import error in backquotes is read."""
    doc = corpus("apex-499.txt")
    assert doc == {"schema": 1, "os": "Ubuntu 16.04", "python": "3.7", "torch": "0.4.1",
                   "import_errors": {"fused_layer_norm_cuda":
                                     "No module named 'fused_layer_norm_cuda'"}}


def test_ubuntu_without_dot_and_python37_pytorch_31243() -> None:
    """pytorch/pytorch#31243: "**Ubuntu1804," and "python37**", the REPL banner, a bare
    driver number "410.48,," in a reply, `pip install torch===1.3.0`."""
    text = (CORPUS / "pytorch-31243.txt").read_text(encoding="utf-8")
    doc = facts(text)
    assert doc["os"] == "Ubuntu 18.04" and doc["python"] == "3.7.5"
    assert doc["driver"] == "410.48" and doc["torch"] == "1.3.0"
    assert "gcc" not in doc  # the banner's [GCC 7.3.0] built Python; it is not the host gcc
    assert formats_of(text, "torch") == ["install_command"]


def test_version_in_parentheses_wpfs_3() -> None:
    """WPFS-3: "the current pyTorch version (v1.10.1)"."""
    assert corpus("WPFS-3.txt")["torch"] == "1.10.1"


def test_title_versions_pytorch_26467() -> None:
    """pytorch/pytorch#26467: the title "Pytorch 1.2 on Red Hat Enterprise Linux 6.4 gives
    'GLIBC_2.14' not found" is an error line too, and still read whole."""
    text = (CORPUS / "pytorch-26467.txt").read_text(encoding="utf-8")
    doc = facts(text)
    assert doc["torch"] == "1.2" and doc["os"] == "Red Hat Enterprise Linux 6.4"
    assert formats_of(text, "torch") == ["title"]
    assert doc["torch_cuda"] == "10.0"  # conda install pytorch … cudatoolkit=10.0


def test_title_wins_over_a_later_slip_pytorch_14274() -> None:
    """pytorch/pytorch#14274: title "pytorch 1.0", later "pytorch 4.0" (meaning 0.4): the
    title is kept, the other is a conflict in explain; `ldd (GNU libc) 2.12` inline."""
    text = (CORPUS / "pytorch-14274.txt").read_text(encoding="utf-8")
    doc = facts(text)
    assert doc["torch"] == "1.0" and doc["glibc"] == "2.12" and doc["os"] == "CentOS 6.8"
    assert any("conflict" in line for line in describe(parse_report(text)) if "4.0" in line)


def test_ranges_are_not_versions_coco_lm_6() -> None:
    """microsoft/COCO-LM#6: "torch>1.1" and "torch>1.11" are ranges; "torch==1.11" is kept."""
    report = parse_report((CORPUS / "COCO-LM-6.txt").read_text(encoding="utf-8"))
    assert [e.value for e in report.explain if e.fact == "torch"] == ["1.11"]


def test_range_words_deepspeed_8235() -> None:
    """deepspeedai/DeepSpeed#8235: "Pytorch2.12 and above" states no torch version."""
    assert "torch" not in corpus("DeepSpeed-8235.txt")


def test_two_systems_on_one_line_state_none() -> None:
    text = "The CentOS Linux release 7.9 & Ubuntu 18.04 have `ImportError`"  # ColossalAI#2402
    assert "os" not in facts(text)


def test_template_examples_in_prose_state_nothing() -> None:
    assert not parse_report(" - OS: [e.g. Ubuntu 18.04]\n").recognised


# --- install commands ------------------------------------------------------------------------

def test_install_commands_deepblast_151() -> None:
    """flatironinstitute/deepblast#151: `conda create -n tmvec python=3.9` and
    `pip3 install torch … --extra-index-url https://download.pytorch.org/whl/cu117`."""
    text = (CORPUS / "deepblast-151.txt").read_text(encoding="utf-8")
    assert facts(text) == {"schema": 1, "python": "3.9", "torch_cuda": "11.7",
                           "requested_torch_cuda": "11.7", "errors": {
                               "driver_old": "RuntimeError: The NVIDIA driver on your system is "
                                             "too old"}}
    assert formats_of(text, "torch_cuda") == ["install_command"]


def test_install_ranks_below_what_is_installed() -> None:
    text = "pip install torch==2.0.1\n[pip3] torch==2.1.0\n"
    assert facts(text)["torch"] == "2.1.0"


# --- paths -----------------------------------------------------------------------------------

def test_env_name_and_site_packages_pytorch_69746() -> None:
    """pytorch/pytorch#69746: "…/anaconda3/envs/py38-pt111/lib/python3.8/site-packages…"."""
    text = (CORPUS / "pytorch-69746.txt").read_text(encoding="utf-8")
    doc = facts(text)
    assert doc["python"] == "3.8" and doc["torch"] == "1.11"
    assert formats_of(text, "torch") == ["env_name"]


def test_env_name_issue_quote() -> None:
    doc = facts("/anaconda3/envs/py38-pt113/lib/python3.8/site-packages/torch/__init__.py")
    assert doc == {"schema": 1, "python": "3.8", "torch": "1.13"}


def test_torch_extensions_dir_deepspeed_4257() -> None:
    """deepspeedai/DeepSpeed#4257: "/root/.cache/torch_extensions/py39_cu117/cpu_adam/…"."""
    doc = corpus("DeepSpeed-4257.txt")
    assert doc["python"] == "3.9" and doc["torch_cuda"] == "11.7"


def test_cpython_tag_ai_toolkit_242() -> None:
    """ostris/ai-toolkit#242: "fused_layer_norm_cuda.cpython-310-x86_64-linux-gnu.so"."""
    doc = corpus("ai-toolkit-242.txt")
    assert doc["python"] == "3.10" and doc["platform"] == "linux-x86_64"


@pytest.mark.parametrize("images", [None, "shipped"])
def test_ngc_image_without_cited_versions_is_explain_only(images) -> None:
    """No table, or a tag the table does not hold (23.09: its notes were not readable)."""
    table = load_images(SHIPPED) if images else None
    report = parse_report("docker run --gpus all nvcr.io/nvidia/pytorch:23.09-py3\n",
                          images=table)
    assert report.snapshot.to_dict() == {"schema": 1}
    image = next(e for e in report.explain if e.fact == "image")
    assert not image.kept and "unknown" in image.note
    assert report.recognised  # not exit 2: the image is recognised, its versions are not known


def test_ngc_image_with_cited_release_notes() -> None:
    """25.12-py3: matrix/curated/ngc.toml records NVIDIA's 25.12 release notes."""
    report = parse_report("FROM nvcr.io/nvidia/pytorch:25.12-py3\n",
                          images=load_images(SHIPPED))
    doc = report.snapshot.to_dict()
    assert doc["torch"] == "2.10.0a0+b4e4ee81d3" and doc["python"] == "3.12"
    assert doc["torch_cuda"] == "13.1"
    assert all("pytorch-release-notes/rel-25-12.html" in e.note for e in report.explain)
    assert facts("FROM nvcr.io/nvidia/pytorch:25.12-py3\n") == {"schema": 1}  # no table


def test_ngc_image_states_only_what_its_record_holds(fixture_matrix) -> None:
    """19.11-py3: the notes read give CUDA 10.2 and Python 3.6, not the torch version, so the
    report states no torch; each fact cites the record's page."""
    report = parse_report("Using the nvcr.io/nvidia/pytorch:19.11-py3 container\n",
                          images=load_images(fixture_matrix))
    assert report.snapshot.to_dict() == {"schema": 1, "torch_cuda": "10.2", "python": "3.6"}
    notes = {e.fact: e.note for e in report.explain if e.format == "ngc_image"}
    assert set(notes) == {"torch_cuda", "python"}
    assert all("pytorch-release-notes/rel_19-11.html" in n for n in notes.values())


def test_the_doctor_reads_the_ngc_table_of_its_matrix(fixture_matrix) -> None:
    from envgen.api import DoctorRequest, Matrix, doctor

    text = "FROM nvcr.io/nvidia/pytorch:19.11-py3\n"
    result = doctor(DoctorRequest(report="-", report_text=text),
                    matrix=Matrix.locate(fixture_matrix))
    assert [line.split("   ")[0] for line in result.explain] == ["python = 3.6",
                                                                "torch_cuda = 10.2"]


@pytest.mark.parametrize(("text", "says"), [
    ("[[image]]\ntag = \"19.11\"\n", "missing 'cuda'"),
    ('[[image]]\ntag = "2025.12"\ncuda = "13.1"\npython = "3.12"\nsource = "https://x"\n'
     'read = "2026-11-28"\n', "not an NGC release tag"),
    ('[[image]]\ntag = "19.11"\ncuda = "10.2"\npython = "3.6"\nsource = "https://x"\n'
     'read = "2026-11-28"\n' * 2, "recorded twice"),
])
def test_a_broken_ngc_table_is_a_data_error(tmp_path, text, says) -> None:
    from envgen.errors import DataError

    (tmp_path / "curated").mkdir()
    (tmp_path / "curated" / "ngc.toml").write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=says):
        load_images(tmp_path)
    with pytest.raises(DataError, match="does not exist"):
        load_images(tmp_path / "nowhere")


# --- the doctor's own commands' outputs ------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("Python 3.13.2", {"python": "3.13.2"}),
    ("1.11.1", {"ninja": "1.11.1"}),
    ("$ ninja --version\n1.11.1\n", {"ninja": "1.11.1"}),
    ("2.1.0+cu121 12.1", {"torch": "2.1.0+cu121", "torch_cuda": "12.1"}),
    ("2.1.0 None", {"torch": "2.1.0", "torch_cuda": None}),
    ("410.48", {"driver": "410.48"}),
    ("ldd (GNU libc) 2.12", {"glibc": "2.12"}),
    ("ldd (Ubuntu GLIBC 2.35-0ubuntu3.8) 2.35", {"glibc": "2.35"}),
    ("name, compute_cap\nNVIDIA H100 80GB HBM3, 9.0\n",
     {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}]}),
])
def test_need_outputs_pasted_alone(text: str, expected: dict) -> None:
    """Issue 38 quotes each: what the doctor's needs ask the user to run, pasted back."""
    assert facts(text) == {"schema": 1, **expected}


def test_python_version_after_a_windows_prompt_deepspeed_7043() -> None:
    """deepspeedai/DeepSpeed#7043: "C:\\Windows\\System32>python --version" / "Python 3.13.2"."""
    doc = corpus("DeepSpeed-7043.txt")
    assert doc["python"] == "3.13.2" and doc["platform"] == "windows"


def test_bare_version_in_a_list_is_not_ninja() -> None:
    assert "ninja" not in facts("torch\n1.11.1\nnumpy\n")


def test_libaio_find_output_ds_report_6972() -> None:
    """deepspeedai/DeepSpeed#6972: `find / -name "libaio.h"` printed /usr/include/libaio.h."""
    text = (FIXTURES / "ds_report_amd_libaio_6972.txt").read_text(encoding="utf-8")
    assert facts(text)["libaio"] == {"library": None, "headers": True}


# --- Windows ---------------------------------------------------------------------------------

def test_windows_from_msvc_linker_error() -> None:
    """deepspeed-windows-wheels#2: "LINK : fatal error LNK1181: … "aio.lib" …"."""
    assert corpus("deepspeed-windows-wheels-2.txt")["platform"] == "windows"


def test_windows_from_drive_path_cuda_mismatch_2902() -> None:
    text = (FIXTURES / "cuda_mismatch_windows_2902.txt").read_text(encoding="utf-8")
    assert facts(text)["platform"] == "windows"
    assert formats_of(text, "platform") == ["windows_sign"]


def test_windows_from_wheel_tag_and_phrase() -> None:
    assert facts("deepspeed-0.16.5-cp311-cp311-win_amd64.whl")["platform"] == "windows"
    assert facts("It fails on Windows")["platform"] == "windows"


def test_collect_env_platform_wins_over_a_windows_sign() -> None:
    """collect_env's "Python platform" of WSL2 outranks a C:\\ path quoted in the log."""
    text = ("Collecting environment information...\nIs debug build: False\n"
            "Python platform: Linux-5.15.133.1-microsoft-standard-WSL2-x86_64-with-glibc2.35\n"
            "C:\\Users\\me>wsl\n")
    assert facts(text)["platform"] == "wsl2"


# --- old collect_env lines and Colossal-AI's report, any case --------------------------------

COLAB = (FIXTURES / "collect_env_colab_46973.txt").read_text(encoding="utf-8")


def test_collect_env_full_width_colon() -> None:
    """pytorch/pytorch#46973's collect_env with the full-width colons some pastes have
    ("GPU 0：…", issue 38)."""
    expected = facts(COLAB)
    assert facts(COLAB.replace(": ", "：")) == expected


def test_collect_env_without_colons() -> None:
    """Old collect_env lines without a colon ("PyTorch version 1.7.0+cu101")."""
    expected = facts(COLAB)
    no_colon = "\n".join(line.replace(": ", " ", 1) if not line.startswith("GPU ") else line
                         for line in COLAB.splitlines())
    assert facts(no_colon) == expected


def test_colossalai_check_lower_case() -> None:
    text = (FIXTURES / "colossalai_check_2992.txt").read_text(encoding="utf-8")
    assert facts(text.lower())["frameworks"] == facts(text)["frameworks"]
    assert facts(text.lower())["torch_cuda"] == facts(text)["torch_cuda"]


# --- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["", "\x00\x01\x02\xff" * 100, "Thanks, it works now!",
                                  "PyTorch version: >2.0", "torch>2.0", "- Python version: >3.8"])
def test_nothing_recognisable(text: str) -> None:
    report = parse_report(text)
    assert not report.recognised and report.snapshot.to_dict() == {"schema": 1}


def test_huge_text_is_read() -> None:
    report = parse_report("Running Pytorch 1.70, CUDA 10.1, python=3.6.9\n" + "x" * 2_000_000)
    assert report.snapshot.to_dict()["python"] == "3.6.9"


def test_cmd_set_line_in_prose_is_a_windows_sign() -> None:
    """deepspeedai/DeepSpeed#5899: "tried setting set DS_BUILD_OPS=0" (cmd.exe's syntax) with a
    Windows-only install problem; no drive path or prompt in the text."""
    report = parse_report((CORPUS / "DeepSpeed-5899.txt").read_text())
    assert report.snapshot.platform == "windows"
    sign = next(e for e in report.explain if e.fact == "platform")
    assert "set DS_BUILD_OPS=0" in sign.text


@pytest.mark.parametrize("line", [
    r"ImportError: DLL load failed while importing _C: D:\env\Lib\torch\_C.cp310-win_amd64.pyd",
    r"(venv) PS D:\work> .\venv\Scripts\activate",
    r"$env:DS_BUILD_OPS = 0",
    r"echo %CUDA_PATH%",
])
def test_windows_only_syntax_is_a_windows_sign(line) -> None:
    assert parse_report(line + "\ntorch 2.2.2").snapshot.platform == "windows"


@pytest.mark.parametrize("line", [
    "set -euo pipefail",  # a POSIX shell's set
    "export DS_BUILD_OPS=0",
    "the reset DS_BUILD_OPS=0 line",
    "growth of 50% over 100%",
])
def test_posix_text_is_not_a_windows_sign(line) -> None:
    assert parse_report(line + "\ntorch 2.2.2").snapshot.platform != "windows"
