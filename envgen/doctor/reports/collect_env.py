"""``python -m torch.utils.collect_env`` output.

Input: the cleaned lines and the set of line numbers other parsers already took. Output: the
facts its lines state. A ``Label: value`` line counts only near collect_env's own lines
("Is debug build", "CUDA used to build PyTorch", …), so a template's "- PyTorch version: 1.13"
is left to the template parser. "CUDA runtime version" is what ``nvcc --version`` on PATH
says (collect_env's get_running_cuda_version), hence nvcc and path_nvcc; "CUDA used to build
PyTorch: None" is a CPU build, and so is "Could not collect" there below a "PyTorch version"
with a version and no ROCm version: collect_env prints ``torch.version.cuda`` and writes its
None as "Could not collect" (replace_nones) unless every CUDA field is missing; other "Could
not collect", "N/A" and "No CUDA" values state nothing.
"""

from __future__ import annotations

import re

from envgen.doctor.reports._lines import Extracted, Line, fact, near, package_facts, version

FORMAT = "collect_env"
# Old collect_env lines have no colon ("Is debug build No"); some pastes a full-width one ("：")
_COLON = r"(?:\s*[:：]\s*|\s+)"
_ANCHOR = re.compile(r"^(?:Collecting environment information|(?:Is debug build|CUDA used to build "
                     r"PyTorch|ROCM used to build PyTorch|Is CUDA available|Versions of "
                     r"relevant libraries|CUDA_MODULE_LOADING set to|Libc version)" + _COLON + ")",
                     re.I)
_LABELS = ("PyTorch version", "CUDA used to build PyTorch", "OS", "GCC version", "Libc version",
           "Python version", "Python platform", "CUDA runtime version",
           "GPU models and configuration", "Nvidia driver version")
_LABEL = {label.lower(): label for label in _LABELS}
_FIELD = re.compile(r"^(" + "|".join(_LABELS) + r")(?:\s*[:：]\s*|\s+|$)(.*)$", re.I)
_GPU = re.compile(r"^GPU\s*(\d+)\s*[:：]\s*(.+?)(?: \(UUID: [^)]*\))?$", re.I)
_PKG = re.compile(r"^\[(?:pip3?|conda)\]\s+(.*)$")
_PIP = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")
_CONDA = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s+(\S+)(?:\s+(\S+))?(?:\s+(\S+))?$")
_CONDA_CUDA = re.compile(r"cuda(\d+)\.(\d+)")
_ARCH = re.compile(r"\((x86_64|aarch64|arm64|AMD64)\)\s*$")
_TRAILING_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?)\s*$")
_NOTHING = ("could not collect", "n/a", "no cuda", "")


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    platforms: list[tuple[int, Line, str]] = []  # (priority, line, platform)
    torch_read = False  # a "PyTorch version" with a version: torch imported
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FIELD.match(line.text)
        if line.number in claimed or line.bullet or not m or not near(lines, i, _ANCHOR, 25, 25):
            i += _package_line(lines, i, claimed, out)
            continue
        label, value = _LABEL[m.group(1).lower()], m.group(2).strip()
        claimed.add(line.number)
        if label == "CUDA used to build PyTorch" and value.lower() == "could not collect" \
                and torch_read and not _rocm_build(lines, i):
            out.append(fact(line, "torch_cuda", None, FORMAT, note=_COULD_NOT_COLLECT))
            i += 1
            continue
        if value.lower() in _NOTHING and label != "GPU models and configuration":
            i += 1
            continue
        if label == "PyTorch version":
            if version(value):
                torch_read = True
                out.append(fact(line, "torch", version(value), FORMAT))
        elif label == "CUDA used to build PyTorch":
            if value == "None":
                out.append(fact(line, "torch_cuda", None, FORMAT, note="a CPU build of torch"))
            elif version(value):
                out.append(fact(line, "torch_cuda", version(value), FORMAT))
        elif label == "OS":
            _os(line, value, out, platforms)
        elif label == "GCC version":
            found = _TRAILING_VERSION.search(value)
            if found:
                out.append(fact(line, "gcc", found.group(1), FORMAT))
        elif label == "Libc version":
            found = re.match(r"glibc-(\S+)$", value)
            if found and version(found.group(1)):
                out.append(fact(line, "glibc", version(found.group(1)), FORMAT))
        elif label == "Python version":
            found = version(value.split()[0])
            if found:
                out.append(fact(line, "python", found, FORMAT))
        elif label == "Python platform":
            _python_platform(line, value, platforms)
        elif label == "CUDA runtime version":
            if version(value):
                note = "collect_env runs `nvcc --version`: the nvcc first on PATH"
                out.append(fact(line, "nvcc", version(value), FORMAT, note=note))
                out.append(fact(line, "path_nvcc", version(value), FORMAT, note=note))
        elif label == "GPU models and configuration":
            i = _gpus(lines, i, value, claimed, out)
            continue
        elif label == "Nvidia driver version" and version(value):
            out.append(fact(line, "driver", version(value), FORMAT))
        i += 1
    if platforms:
        _, line, platform = min(platforms, key=lambda p: (p[0], p[1].number))
        out.append(fact(line, "platform", platform, FORMAT))
    return out


_COULD_NOT_COLLECT = ("a CPU build of torch: torch imported, and collect_env writes a None "
                      "torch.version.cuda as \"Could not collect\"")
_ROCM = re.compile(r"^ROCM used to build PyTorch" + _COLON + r"(.*)$", re.I)


def _rocm_build(lines: list[Line], i: int) -> bool:
    """A ROCm version on one of the few lines after ``i`` (a ROCm build also has no CUDA)."""
    for line in lines[i + 1:i + 4]:
        m = _ROCM.match(line.text)
        if m:
            return m.group(1).strip().lower() not in _NOTHING
    return False


def _os(line: Line, value: str, out: list[Extracted], platforms: list) -> None:
    arch = _ARCH.search(value)
    name = _ARCH.sub("", value).strip()
    if name:
        out.append(fact(line, "os", name, FORMAT))
    lowered = name.lower()
    if "windows" in lowered:
        platforms.append((1, line, "windows"))
    elif arch and ("mac" in lowered) and arch.group(1) == "arm64":
        platforms.append((1, line, "macos-arm64"))
    elif arch and "mac" not in lowered and arch.group(1) in ("x86_64", "aarch64"):
        platforms.append((1, line, f"linux-{arch.group(1)}"))


def _python_platform(line: Line, value: str, platforms: list) -> None:
    lowered = value.lower()
    if "microsoft-standard-wsl2" in lowered or "-wsl2-" in lowered:
        platforms.append((0, line, "wsl2"))
    elif lowered.startswith("windows"):
        platforms.append((0, line, "windows"))
    elif lowered.startswith("macos") and "arm64" in lowered:
        platforms.append((0, line, "macos-arm64"))
    elif lowered.startswith("linux") and "microsoft" not in lowered:
        for arch in ("x86_64", "aarch64"):
            if f"-{arch}-" in lowered or lowered.endswith(f"-{arch}"):
                platforms.append((0, line, f"linux-{arch}"))


def _gpus(lines: list[Line], i: int, value: str, claimed: set[int],
          out: list[Extracted]) -> int:
    """The GPU list: on the label's line ("GPU 0: …") or on the lines after it."""
    first = lines[i]
    names = []
    if value:
        m = _GPU.match(value)
        if m:
            names.append(m.group(2).strip())
        i += 1
    else:
        i += 1
        while i < len(lines) and not lines[i].text:
            i += 1
        while i < len(lines):
            m = _GPU.match(lines[i].text)
            if not m:
                break
            claimed.add(lines[i].number)
            names.append(m.group(2).strip())
            i += 1
    if names:
        gpus = tuple({"name": n, "compute_capability": None} for n in names)
        out.append(fact(first, "gpus", gpus, FORMAT))
    return i


def _package_line(lines: list[Line], i: int, claimed: set[int], out: list[Extracted]) -> int:
    """A "[pip3] name==version" or "[conda] name version build channel" line: 1."""
    line = lines[i]
    m = _PKG.match(line.text)
    if not m or line.number in claimed:
        return 1
    claimed.add(line.number)
    body = m.group(1).strip()
    pip = _PIP.match(body)
    if line.text.startswith("[pip") and pip:
        for name, value in package_facts(pip.group(1), version(pip.group(2))):
            out.append(fact(line, name, value, "pip_list"))
        return 1
    conda = _CONDA.match(body)
    if line.text.startswith("[conda]") and conda and version(conda.group(2)):
        out.extend(conda_package(line, conda.group(1), version(conda.group(2)),
                                 conda.group(3) or "", "conda_list"))
    return 1


def conda_package(line: Line, name: str, value: str | None, build: str,
                  fmt: str) -> list[Extracted]:
    """The facts of one conda package; conda's "python" is the environment's interpreter,
    its "pytorch" the torch distribution, and its
    build string names the CUDA it was built for ("py3.10_cuda12.1_cudnn8.9.2_0") or says a
    CPU build ("py3.10_cpu_0")."""
    if name.lower() == "python" and value:  # the environment's interpreter
        return [fact(line, "python", value, fmt)]
    if name.lower() != "pytorch":
        return [fact(line, n, v, fmt) for n, v in package_facts(name, value)]
    out = [fact(line, n, v, fmt) for n, v in package_facts("torch", value)]
    cuda = _CONDA_CUDA.search(build)
    if cuda:
        out.append(fact(line, "torch_cuda", f"{cuda.group(1)}.{cuda.group(2)}", fmt,
                        note=f"from the conda build string {build}"))
    elif re.search(r"(?:^|_)cpu(?:_|$)", build):
        out.append(fact(line, "torch_cuda", None, fmt,
                        note=f"the conda build string {build} is a CPU build"))
    return out
