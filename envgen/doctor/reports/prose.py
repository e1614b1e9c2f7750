"""Versions written in prose, in the title, in install commands and in paths; Windows signs.

Input: the cleaned lines and the line numbers other parsers took (this parser runs last).
Output, each fact with its line:
- prose and compact versions: "Running Pytorch 1.70, CUDA 10.1, python=3.6.9",
  "colossalai-0.1.8", "torch1.8cu10.1", "python3.8", "Ubuntu1804", "CentOS release 6.8",
  "driver 410.48", "nvcc 12.1", "my glibc version is 2.17" (not "requires glibc 2.28"), "torch
  version is 1.10.0", Chinese "pytorch版本是2.0.1", "my torch.version.cuda is 9.0.176",
  conda's "Pytorch-cuda 11.8", versions joined by slashes "CUDA 12.0/PyTorch 2.0.0" (format
  "prose"; "title" on the paste's first line). A range ("torch>1.11",
  "Pytorch2.12 and above") states no version. A bare "CUDA 10.1" does not say which CUDA:
  explain only. torch 1.x stopped at 1.13, so "Pytorch 1.70" is read as 1.7.0, with a note;
- install commands ("pip install torch==1.13.1 --extra-index-url …/whl/cu117", "conda install
  pytorch cudatoolkit=10.0", "conda create -n x python=3.9"): what was asked for, ranked below
  everything else (format "install_command"); the CUDA build of torch they ask for, and a
  conda environment file's "- cudatoolkit=11.3" below "dependencies:", also as
  requested_torch_cuda (a CPU build installed instead is the conda fallback);
- paths: ".../lib/python3.8/site-packages/" (or lib64), "….cpython-310-x86_64-linux-gnu.so",
  "torch_extensions/py39_cu117/" (torch's build directory: Python and torch.version.cuda),
  an environment's name "envs/py38-pt110/" (format "path"; a name is a label, ranked last);
- the toolkit folder of an nvcc a line names ("/usr/local/cuda-11.2/bin/nvcc": nvcc 11.2,
  format "path");
- NVIDIA's CUDA image "nvidia/cuda:11.8.0-devel-ubuntu20.04": devel has the tag's nvcc, runtime
  and base have none (format "ngc_image": below what a build or a tool prints);
- an NGC image "nvcr.io/nvidia/pytorch:23.09-py3": the torch, CUDA and Python that the table
  passed in (``images``: matrix/curated/ngc.toml, each record citing NVIDIA's release notes for
  its tag) gives that tag, a version the notes do not state left out; with no table or a tag
  not in it, the image alone, explain only, versions unknown;
- Windows: a prompt "C:\\…>", a drive path "C:\\Users\\…", MSVC's "cl.exe" / "LNK1181",
  "on Windows", a "win_amd64" wheel, an extension module ".pyd" (Python's Windows FAQ: "a
  *.pyd file is a dll"), a venv's "\\Scripts\\" folder (the venv docs: Scripts on Windows, bin
  on POSIX), cmd's "set NAME=value" and "%NAME%", PowerShell's "$env:NAME" → platform windows
  (format "windows_sign");
- macOS: a home folder "/Users/name/", "macOS", "MacBook", "darwin", ".dylib" → os macOS; an
  Apple silicon chip ("M3 Pro MacBook"), an arm64 macOS wheel or triple → platform macos-arm64
  as well (format "macos_sign");
- "NCCL version 2.10.3" (NCCL's INFO line, torch's NCCL errors): explain only, as the NCCL a
  process loaded is not always the one torch pins.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from envgen.doctor.reports._lines import Extracted, Line, fact, near

if TYPE_CHECKING:
    from envgen.doctor.images import NgcImage

# where a name may start: not inside a word, a path or a dotted name; after a slash only when a
# version ends there ("CUDA 12.0/PyTorch 2.0.0/python 3.8.16", not ".../site-packages/torch")
_AFTER = r"(?<![\w.\\-])(?<![A-Za-z_.-]/)"
_V = r"v?(\d+\.\d+(?:\.\d+)?(?:\.dev\d+|a\d+|rc\d+)?(?:\+[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)?)"
_SEP = r"(?:\s*(?:version|ver\.?)\b)?(?:\s+is\b)?\s*[:=\-]?\s*\(?"
_TORCH = re.compile(_AFTER + r"(?:py)?torch" + _SEP + _V + r"(?:\s*cu(\d+(?:\.\d+)?))?",
                    re.I)
_PYTHON = re.compile(_AFTER + r"python" + _SEP + r"v?([23]\.\d{1,2}(?:\.\d+)?)(?![\w/])",
                     re.I)
_FRAMEWORK = re.compile(_AFTER + r"(deepspeed|colossal-?ai|megatron[-_]core)" + _SEP + _V,
                        re.I)
_GCC = re.compile(r"(?<![\w/.\\\[-])(?:gcc|g\+\+)" + _SEP + r"(\d+\.\d+(?:\.\d+)?)\b", re.I)
_DRIVER = re.compile(r"\bdriver" + _SEP + r"(\d{3}\.\d{2,3}(?:\.\d{2})?)\b", re.I)
# "nvcc 12.1", "NVCC version 11.8", "nvcc -V shows release 11.3", "nvcc is 11.7"
_NVCC = re.compile(_AFTER + r"nvcc(?:\s+(?:-V|--version))?(?:\s+(?:shows|says|reports|"
                   r"gives|prints))?(?:\s+(?:release|version|ver\.?))?(?:\s+is\b)?\s*[:=]?\s*"
                   r"v?(\d{1,2}\.\d+(?:\.\d+)?)\b(?![.\d])", re.I)
# "my glibc version is 2.17", "GLIBC 2.31", "GNU libc 2.35" — not what something requires
_GLIBC = re.compile(_AFTER + r"(?:glibc|GNU libc)(?:\s+version)?(?:\s+is)?\s*[:=]?\s*"
                    r"v?(2\.\d{1,2})\b(?![.\d])", re.I)
_NEEDS = re.compile(r"(?:needs?|requires?|required|at least|>=|≥|newer than|or later|minimum)\W*"
                    r"(?:\w+\W+){0,2}$", re.I)
# "NCCL version 2.18.1+cuda12.1" (NCCL's INFO line, torch's "NCCL error … NCCL version 2.10.3")
# "my torch.version.cuda is 9.0.176", "torch.version.cuda: 11.7" (the value torch reports)
_VERSION_CUDA = re.compile(r"\btorch\.version\.cuda\)?\s*(?:is|=|==|:|：|->)\s*['\"]?"
                           r"(\d{1,2}\.\d(?:\.\d+)?)\b")
# conda's "pytorch-cuda 11.8" (the package that picks torch's CUDA build) named in prose
_PYTORCH_CUDA = re.compile(_AFTER + r"pytorch-cuda\s*(?:==?|:)?\s*(\d{1,2}\.\d)\b(?![.\d])", re.I)
_NCCL = re.compile(r"\bNCCL\s+version\s*[:=]?\s*v?(\d+\.\d+\.\d+)", re.I)
_CUDA = re.compile(_AFTER + r"cuda" + _SEP + r"(\d{1,2}(?:\.\d+){0,2})\b(?![.\d])", re.I)
# Chinese: "pytorch版本是2.0.1", "torch版本为1.13", or torch named and "我的版本是2.0.1" (my
# version is) later on the line; CJK characters are word characters, so ASCII boundaries
_ZH_VERSION = re.compile(r"版本\s*号?\s*(?:是|为|：|:|=)\s*v?(\d+\.\d+(?:\.\d+)?)(?![.\d])")
_ZH_TORCH = re.compile(r"(?<![A-Za-z0-9_/.\\-])(?:py)?torch(?![A-Za-z0-9_])", re.I)
_ZH_DIRECT = re.compile(r"(?<![A-Za-z0-9_/.\\-])(?:py)?(torch|python|deepspeed)\s*的?\s*版本"
                        r"\s*号?\s*(?:是|为|：|:|=)?\s*v?(\d+\.\d+(?:\.\d+)?)(?![.\d])", re.I)
_ZH_OTHER = re.compile(r"(?<![A-Za-z])(?:python|cuda|nvcc|gcc|deepspeed|colossal|megatron|driver|"
                       r"nccl|transformers)(?![A-Za-z])|驱动", re.I)
_RANGE_AFTER = re.compile(r"^\s*(?:\+(?![\w.])|and (?:above|later|newer|up)|or (?:above|later|"
                          r"newer|higher)|[-~]\s*\d|\.x\b)", re.I)
_OS = (
    (re.compile(r"\bubuntu[\s-]*(\d{2})\.?(0[4-9]|10)\b", re.I), "Ubuntu {}.{}"),
    (re.compile(r"\bcentos(?:\s+linux)?(?:\s+release)?\s*(\d+)(?:\.(\d+))?", re.I), "CentOS {}.{}"),
    (re.compile(r"\bred hat enterprise linux(?:\s+\w+)?(?:\s+release)?\s+(\d+)(?:\.(\d+))?",
                re.I), "Red Hat Enterprise Linux {}.{}"),
)
_INSTALL = re.compile(r"\b(?:pip3?|conda|mamba|micromamba|uv\s+pip)\s+(?:install|create)\b", re.I)
_PIN = re.compile(r"(?<![\w.-])(pytorch|torch|deepspeed|colossalai|megatron[-_]core|python)\s*"
                  r"={1,3}\s*(\d+(?:\.\d+)+(?:\+\w+)?)\b", re.I)
_EXAMPLE = re.compile(r"\[e\.g\.[^\]]*\]|\(e\.g\.[^)]*\)", re.I)
_PYTHON_COMPACT = re.compile(_AFTER + r"python(3)(\d{1,2})(?![\w./])", re.I)
_PIP_PROGRESS = re.compile(r"^(?:Collecting|Using cached|Downloading|Building wheel for)\s", re.I)
_WHL_CUDA = re.compile(r"download\.pytorch\.org/whl/(?:nightly/)?cu(\d+)\b", re.I)
_CONDA_CUDA = re.compile(r"\b(?:cudatoolkit|pytorch-cuda)\s*==?\s*(\d+\.\d+)", re.I)
# the CPU-only builds as PyTorch's install commands ask for them (pytorch.org/get-started/
# previous-versions: conda's "cpuonly" package, pip's …/whl/cpu index)
_CPU_ONLY = re.compile(r"(?<![\w-])cpuonly(?![\w-])|download\.pytorch\.org/whl/(?:nightly/)?cpu\b",
                       re.I)
# a conda environment file's dependency (environment.yml: "dependencies:", "  - cudatoolkit=11.3")
_ENV_FILE_CUDA = re.compile(r"(?:cudatoolkit|pytorch-cuda)\s*==?\s*(\d+\.\d+)(?:\.\*|\.\d+)?")
_ENV_FILE_DEPS = re.compile(r"^dependencies\s*:\s*$")
_SITE = re.compile(r"/lib(?:64)?/python(\d\.\d+)/(?:site|dist)-packages\b")
_CPYTHON = re.compile(r"\.cpython-(\d)(\d+)m?-(x86_64|aarch64)-linux-gnu\.so\b")
_EXT_DIR = re.compile(r"torch_extensions/py(\d)(\d+)_cu(\d+)/")
_ENV = re.compile(r"[/\\]envs[/\\]([\w.-]+)[/\\]")
# NVIDIA's CUDA images ("nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04", a title's
# "cuda:11.8.0-devel-ubuntu20.04"): devel adds the compiler toolchain to runtime, which adds the
# toolkit's libraries to base (NVIDIA's container images page)
_CUDA_IMAGE = re.compile(r"(?<![\w.-])(?:nvidia/)?cuda:(\d{1,2}\.\d)(?:\.\d+)?-(?:cudnn\d*-)?"
                         r"(devel|runtime|base)\b", re.I)
# the nvcc a build ran, by its toolkit's folder: "/usr/local/cuda-11.2/bin/nvcc",
# "/usr/local/cuda-8.0-cudnn6/bin/nvcc", "/opt/…/cuda/11.7/bin/nvcc"
_NVCC_PATH = re.compile(r"/cuda[-/_]?(\d{1,2}\.\d)(?:[-.][\w.-]*)?/bin/nvcc(?:\.exe)?\b", re.I)
_NGC = re.compile(r"\bnvcr\.io/nvidia/pytorch:(\d{2}\.\d{2})-py3\b", re.I)
_WINDOWS = re.compile(r"^[A-Z]:\\[^>]*>|\b[A-Z]:\\(?:Users|Windows|Program Files|ProgramData)\b|"
                      r"\bcl\.exe\b|\bLNK\d{4}\b|\bon Windows\b|\bwin_amd64\b|\w\.pyd\b|"
                      r"\\Scripts\\|\$env:[A-Za-z_]\w*", re.I)
# Apple silicon (arm64 macOS: the one macOS platform in envgen's data): an M-series chip, an
# arm64 macOS wheel or triple
_APPLE_SILICON = re.compile(r"\bM[1-5](?:\s+(?:Pro|Max|Ultra))?\s+(?:chip|Mac|MacBook|Pro|Max|"
                            r"Ultra)\b|\bMacBook\s+(?:Pro|Air)\s+M[1-5]\b|\bApple\s+Silicon\b|"
                            r"macosx_\d+_\d+_arm64\b|\barm64-apple-darwin", re.I)
# macOS of either architecture: a home folder "/Users/name/", the system's names
_MACOS = re.compile(r"(?:^|[\s\"'(])/Users/[^/\s]+/|\bmac\s?OS(?:\s?X)?\b|\bMacBook\b|"
                    r"\bdarwin\b|\.dylib\b", re.I)
# cmd.exe's environment syntax (learn.microsoft.com windows-commands/set_1): "set NAME=value",
# "%NAME%"; upper-case names only (a POSIX shell's `set` takes no NAME=value)
_CMD_ENV = re.compile(r"(?:^|[\s`>])set [A-Z_][A-Z0-9_]*=\S|%[A-Z_][A-Z0-9_]*%")


def parse(lines: list[Line], claimed: set[int], *,
          images: Mapping[str, NgcImage] | None = None) -> list[Extracted]:
    """``images``: the NGC table (tag → its release notes' versions); None: no versions known."""
    out: list[Extracted] = []
    windows = mac = False
    for i, line in enumerate(lines):
        if not line.text:
            continue
        out.extend(_paths(line, images or {}))
        wanted = _ENV_FILE_CUDA.fullmatch(line.text) if line.bullet else None
        if wanted and near(lines, i, _ENV_FILE_DEPS, 40, 0):
            out.append(fact(line, "requested_torch_cuda", wanted.group(1), "install_command",
                            note="a dependency of a conda environment file: asked for, maybe "
                                 "never installed"))
        if not windows and (_WINDOWS.search(line.source) or _CMD_ENV.search(line.source)):
            windows = True
            out.append(fact(line, "platform", "windows", "windows_sign",
                            note="a Windows prompt, drive path, MSVC message, wheel, .pyd, "
                            "Scripts folder or cmd/PowerShell variable syntax"))
        silicon = not mac and bool(_APPLE_SILICON.search(line.source))
        if silicon or (not mac and _MACOS.search(line.source)):
            mac = True
            out.append(fact(line, "os", "macOS", "macos_sign",
                            note="a macOS home folder, name, MacBook, Darwin, .dylib or chip"))
            if silicon:
                out.append(fact(line, "platform", "macos-arm64", "macos_sign",
                                note="an Apple silicon chip, wheel or triple"))
        if line.number in claimed and line.number != 1:  # the title is read whole
            continue
        if _INSTALL.search(line.text):
            out.extend(_install(line))
        else:
            out.extend(_prose(line))
    return out


def _prose(line: Line) -> list[Extracted]:
    fmt = "title" if line.number == 1 else "prose"
    if _PIP_PROGRESS.match(line.text):  # pip fetching what it was asked to install
        fmt = "install_command"
    text = _EXAMPLE.sub("", line.text)  # a template's "[e.g. Ubuntu 18.04]" states nothing
    out: list[Extracted] = []
    for m in _TORCH.finditer(text):
        if _RANGE_AFTER.match(text[m.end():]) or int(m.group(1).split(".")[0]) > 9:
            continue  # a range, or no torch ("compile PyTorch (12.1)" is a CUDA)
        value, note = _torch_version(m.group(1))
        out.append(fact(line, "torch", value, fmt, note=note))
        cuda = m.group(2) or _local_cuda(value)
        if cuda:
            out.append(fact(line, "torch_cuda", _cuda(cuda), fmt))
    for m in _ZH_DIRECT.finditer(text):  # "torch版本为1.13.1，python版本3.8"
        name = m.group(1).lower()
        name = {"deepspeed": "frameworks.deepspeed"}.get(name, name)
        if not any(e.fact == name for e in out):
            out.append(fact(line, name, m.group(2), fmt))
    if not any(e.fact == "torch" for e in out) and _ZH_TORCH.search(text) and \
            not _ZH_OTHER.search(text):
        said = _ZH_VERSION.findall(text)
        if len(said) == 1:
            out.append(fact(line, "torch", said[0], fmt, note="\"版本\" (version) on a line "
                            "that names torch and no other package"))
    for m in _FRAMEWORK.finditer(text):
        if not _RANGE_AFTER.match(text[m.end():]):
            name = m.group(1).lower().replace("_", "-").replace("colossal-ai", "colossalai")
            out.append(fact(line, f"frameworks.{name}", m.group(2), fmt))
            out.append(fact(line, f"packages.{name}", m.group(2), fmt))
    simple = ((_PYTHON, "python"), (_GCC, "gcc"), (_DRIVER, "driver"), (_NVCC, "nvcc"))
    for pattern, name in simple:
        for m in pattern.finditer(text):
            if not _RANGE_AFTER.match(text[m.end():]):
                out.append(fact(line, name, m.group(1), fmt))
    for m in _VERSION_CUDA.finditer(text):
        out.append(fact(line, "torch_cuda", m.group(1), fmt, note="torch.version.cuda, as written"))
    for m in _PYTORCH_CUDA.finditer(text):
        out.append(fact(line, "torch_cuda", m.group(1), fmt, note="conda's pytorch-cuda package"))
    for m in _PYTHON_COMPACT.finditer(text):  # "python37"
        out.append(fact(line, "python", f"{m.group(1)}.{m.group(2)}", fmt))
    for m in _CUDA.finditer(text):
        if not _RANGE_AFTER.match(text[m.end():]):
            out.append(fact(line, "cuda", m.group(1), fmt, kept=False, note="explain only: a "
                            "bare \"CUDA\" may be the toolkit's, torch's build or the driver's"))
    for m in _GLIBC.finditer(text):
        if not _NEEDS.search(text[max(0, m.start() - 30):m.start()]) and \
                not _RANGE_AFTER.match(text[m.end():]):
            out.append(fact(line, "glibc", m.group(1), fmt))
    for m in _NCCL.finditer(text):
        out.append(fact(line, "nccl", m.group(1), fmt, kept=False, note="explain only: the "
                        "NCCL a process loaded, which is not always the one torch pins"))
    named = [(m, shape) for pattern, shape in _OS for m in [pattern.search(text)] if m]
    if len(named) == 1:  # "CentOS 7.9 & Ubuntu 18.04" says no one system
        m, shape = named[0]
        out.append(fact(line, "os", shape.format(m.group(1), m.group(2) or "x")
                        .removesuffix(".x"), fmt))
    return out


def _torch_version(value: str) -> tuple[str, str]:
    """torch 1.x ended at 1.13: "1.70" is 1.7.0 written without its dot."""
    m = re.fullmatch(r"1\.([1-9])0", value)
    if m:
        read = f"1.{m.group(1)}.0"
        return read, f"written {value}; torch 1.x ended at 1.13, read as {read}"
    return value, ""


def _local_cuda(value: str) -> str | None:
    m = re.search(r"\+cu(\d+)$", value)
    return m.group(1) if m else None


def _cuda(value: str) -> str:
    """"10.1" stays; a wheel tag's "121" is 12.1, "92" 9.2 (the last digit is the minor)."""
    return value if "." in value else f"{value[:-1]}.{value[-1]}"


def _install(line: Line) -> list[Extracted]:
    note = "what an install command asked for, maybe never installed"
    out: list[Extracted] = []
    torch = False
    for m in _PIN.finditer(line.text):
        name, value = m.group(1).lower(), m.group(2)
        if name in ("torch", "pytorch"):
            torch = True
            out.append(fact(line, "torch", value, "install_command", note=note))
        elif name == "python":
            out.append(fact(line, "python", value, "install_command", note=note))
        else:
            key = name.replace("_", "-")
            out.append(fact(line, f"frameworks.{key}", value, "install_command", note=note))
    torch = torch or bool(re.search(r"(?<![\w/.-])(?:py)?torch\b", line.text, re.I))
    cuda = _WHL_CUDA.search(line.text)
    conda = _CONDA_CUDA.search(line.text)
    if torch and (cuda or conda):
        value = _cuda(cuda.group(1)) if cuda else conda.group(1)
        out.append(fact(line, "torch_cuda", value, "install_command", note=note))
        out.append(fact(line, "requested_torch_cuda", value, "install_command"))
    elif torch and _CPU_ONLY.search(line.text):
        note = f"{note}: the CPU-only build (cpuonly, or the …/whl/cpu index)"
        out.append(fact(line, "torch_cuda", None, "install_command", note=note))
        out.append(fact(line, "requested_torch_cuda", None, "install_command", note=note))
    return out


def _paths(line: Line, images: Mapping[str, NgcImage]) -> list[Extracted]:
    text = line.text
    out: list[Extracted] = []
    ran = _NVCC_PATH.search(text)
    if ran:
        out.append(fact(line, "nvcc", ran.group(1), "path",
                        note="the toolkit folder of the nvcc the line names"))
    image = _CUDA_IMAGE.search(text)
    if image and image.group(2).lower() == "devel":
        out.append(fact(line, "nvcc", image.group(1), "ngc_image",
                        note="the toolkit of NVIDIA's devel CUDA image, as its tag names it"))
    elif image:
        out.append(fact(line, "nvcc", None, "ngc_image",
                        note=f"NVIDIA's {image.group(2).lower()} CUDA image has no compiler "
                             "(devel adds it), unless a later step installs one"))
    site = _SITE.search(text)
    if site:
        out.append(fact(line, "python", site.group(1), "path",
                        note="the interpreter directory of a site-packages path"))
    cpython = _CPYTHON.search(text)
    if cpython:
        out.append(fact(line, "python", f"{cpython.group(1)}.{cpython.group(2)}", "path",
                        note="an extension module's CPython tag"))
        out.append(fact(line, "platform", f"linux-{cpython.group(3)}", "path",
                        note="an extension module's platform tag"))
    ext = _EXT_DIR.search(text)
    if ext:
        note = "torch's extension build directory py<python>_cu<torch.version.cuda>"
        out.append(fact(line, "python", f"{ext.group(1)}.{ext.group(2)}", "path", note=note))
        out.append(fact(line, "torch_cuda", _cuda(ext.group(3)), "path", note=note))
    env = _ENV.search(text)
    if env:
        out.extend(_env_name(line, env.group(1)))
    ngc = _NGC.search(text)
    if ngc:
        out.extend(_ngc(line, ngc.group(0), images.get(ngc.group(1))))
    return out


def _env_name(line: Line, name: str) -> list[Extracted]:
    """"py38-pt110" → Python 3.8, torch 1.10: a name someone chose, so ranked last."""
    note = f"from the environment's name {name}: a label, not a check"
    out = []
    for part in re.split(r"[-_]", name.lower()):
        m = re.fullmatch(r"py(3)(\d{1,2})", part)
        if m:
            out.append(fact(line, "python", f"3.{m.group(2)}", "env_name", note=note))
        m = re.fullmatch(r"pt([12])(\d{1,2})", part)
        if m:
            out.append(fact(line, "torch", f"{m.group(1)}.{m.group(2)}", "env_name", note=note))
    return out


def _ngc(line: Line, image: str, known: NgcImage | None) -> list[Extracted]:
    if known is None:
        return [fact(line, "image", image, "ngc_image", kept=False,
                     note="explain only: NVIDIA's container; its torch, CUDA and Python are "
                     "not in envgen's data for this tag, so they are unknown")]
    note = f"NVIDIA's release notes for {image} ({known.source})"
    values = {"torch": known.torch, "torch_cuda": known.torch_cuda, "python": known.python}
    return [fact(line, name, value, "ngc_image", note=note)
            for name, value in values.items() if value is not None]
