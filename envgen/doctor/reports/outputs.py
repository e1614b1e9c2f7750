"""What the doctor's own "how to get it" commands print, pasted alone or after their prompt.

Input: the cleaned lines and the line numbers other parsers took. Output: the facts each
command's output states (see the needs in envgen/doctor/rules_*.py):
- ``python --version`` → "Python 3.13.2"; the REPL banner "Python 3.8.10 (default, …)
  [GCC 9.4.0] on linux" likewise (its GCC built Python, it is not the host gcc; "on win32"
  is Windows);
- ``ldd --version | head -1`` → "ldd (GNU libc) 2.12", "ldd (Ubuntu GLIBC 2.35-0ubuntu3) 2.35";
- ``nvidia-smi --query-gpu=driver_version --format=csv,noheader`` → a bare "410.48";
- ``nvidia-smi --query-gpu=name,compute_cap --format=csv`` → "name, compute_cap" and rows;
- ``python -c "import torch; print(torch.__version__, torch.version.cuda)"`` →
  "2.1.0+cu121 12.1" ("… None": a CPU build);
- ``ls /usr/include/libaio.h; ldconfig -p | grep libaio`` → the header's path or ls's "cannot
  access", and ldconfig's "libaio.so.1 (libc6,x86-64) => …";
- ``ninja --version`` → "1.11.1" and ``print(torch.version.cuda)`` → "12.1" (old releases
  print "9.0.176", as pytorch#28195 pastes): a bare version
  says which program printed it only right after the command's line, or as the whole paste;
- ``>>> torch.__version__`` (or ``print(torch.__version__)``) → "'0.1.12+0ba2043'" on the next
  line.
"""

from __future__ import annotations

import re

from envgen.doctor.reports._lines import Extracted, Line, fact, version

FORMAT = "command_output"
# "Python 3.13.2", one space as python prints it ("python   3.5.6" is a package list's row)
_PYTHON = re.compile(r"^Python (\d\.\d+\.\d+\S*)\s*(?:\(.*?\)\s*(?:\[[^\]]*\])?\s*"
                     r"(?:on\s+(\w+))?)?$", re.I)
# the banner's second line: "[MSC v.1916 64 bit (AMD64)] on win32"
_BANNER_2 = re.compile(r"^\[(?:GCC|MSC|Clang)[^\]]*\].*\bon\s+win32\s*$", re.I)
_LDD = re.compile(r"\bldd\s+\((?:GNU libc|[^)]*GLIBC[^)]*)\)\s+(\d+\.\d+)\b", re.I)
_DRIVER = re.compile(r"^(\d{3}\.\d{2,3}(?:\.\d{2})?)[,;.\s]*$")  # "410.48,," in a reply
_GPU_HEADER = re.compile(r"^name,\s*compute_cap$", re.I)
_GPU_ROW = re.compile(r"^([^,]+?),\s*(\d{1,2}\.\d)$")
_TORCH = re.compile(r"^(\d\.\d+\.\d+(?:\.dev\d+|a0|rc\d+)?(?:\+[\w.]+)?)\s+(\d{1,2}\.\d|None)$")
_LIBAIO_H = re.compile(r"^/usr/include/libaio\.h$")
_NO_LIBAIO_H = re.compile(r"cannot access '?/usr/include/libaio\.h'?: No such file", re.I)
_LIBAIO_SO = re.compile(r"^libaio\.so\.1(?:t64)?\s+\([^)]*\)\s+=>\s+\S+")
_NINJA = re.compile(r"^1\.\d+\.\d+(?:\.git)?$")
_CUDA = re.compile(r"^(\d{1,2}\.\d|None)$")
_CUDA_AFTER = re.compile(r"^(\d{1,2}\.\d(?:\.\d+)?|None)$")  # old torch: "9.0.176"
_NINJA_CMD = re.compile(r"\bninja\s+--version\b", re.I)
_CUDA_CMD = re.compile(r"torch\.version\.cuda\)?\s*['\"]?\s*$", re.I)
_TORCH_CMD = re.compile(r"torch\.__version__\)?\s*['\"]?\s*$")
_QUOTED = re.compile(r"^(['\"]?)(\d+\.\d+(?:\.\d+)?(?:[.+\-]?[\w.+]+)?)\1$")


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    alone = len([line for line in lines if line.text]) == 1
    for i, line in enumerate(lines):
        if line.number in claimed or not line.text:
            continue
        before = _previous(lines, i)
        found = _one(line, before, alone)
        if not found and _GPU_HEADER.match(line.text):
            found = _gpus(lines, i, claimed)
        if found:
            claimed.add(line.number)
            out.extend(found)
    return out


def _previous(lines: list[Line], i: int) -> str:
    """The nearest non-empty line above ``i`` (a prompt and command), or ""."""
    for j in range(i - 1, max(-1, i - 3), -1):
        if lines[j].text:
            return lines[j].text
    return ""


def _one(line: Line, before: str, alone: bool) -> list[Extracted]:
    text = line.text
    m = _PYTHON.match(text)
    if m:
        out = [fact(line, "python", m.group(1), FORMAT)]
        if m.group(2) and m.group(2).lower() == "win32":
            out.append(fact(line, "platform", "windows", FORMAT, note="the REPL banner says win32"))
        return out
    m = _BANNER_2.match(text)
    if m:
        return [fact(line, "platform", "windows", FORMAT, note="the REPL banner says win32")]
    m = _LDD.search(text)
    if m:
        return [fact(line, "glibc", m.group(1), FORMAT, note="`ldd --version`")]
    m = _DRIVER.match(text)
    if m:
        return [fact(line, "driver", m.group(1), FORMAT,
                     note="a bare driver version, as `nvidia-smi --query-gpu=driver_version` "
                     "prints it")]
    m = _TORCH.match(text)
    if m:
        cuda = None if m.group(2) == "None" else m.group(2)
        note = "print(torch.__version__, torch.version.cuda)"
        return [fact(line, "torch", m.group(1), FORMAT, note=note),
                fact(line, "torch_cuda", cuda, FORMAT, note=note)]
    if _LIBAIO_H.match(text):
        return [fact(line, "libaio.headers", True, FORMAT, note="ls finds libaio.h")]
    if _NO_LIBAIO_H.search(text):
        return [fact(line, "libaio.headers", False, FORMAT, note="ls does not find libaio.h")]
    if _LIBAIO_SO.match(text):
        return [fact(line, "libaio.library", True, FORMAT, note="ldconfig lists libaio.so.1")]
    if _NINJA.match(text) and (alone or _NINJA_CMD.search(before)):
        return [fact(line, "ninja", text, FORMAT, note="`ninja --version`")]
    m = _QUOTED.match(text)
    if m and _TORCH_CMD.search(before):
        return [fact(line, "torch", m.group(2), FORMAT, note="torch.__version__")]
    m = _CUDA_AFTER.match(text) if _CUDA_CMD.search(before) else _CUDA.match(text)
    if m and (_CUDA_CMD.search(before) or (alone and m.group(1) != "None")):
        value = None if m.group(1) == "None" else version(m.group(1))
        return [fact(line, "torch_cuda", value, FORMAT, note="print(torch.version.cuda)")]
    return []


def _gpus(lines: list[Line], i: int, claimed: set[int]) -> list[Extracted]:
    rows = []
    for line in lines[i + 1:]:
        m = _GPU_ROW.match(line.text)
        if not m:
            break
        claimed.add(line.number)
        rows.append({"name": m.group(1).strip(), "compute_capability": m.group(2)})
    if not rows:
        return []
    return [fact(lines[i], "gpus", tuple(rows), FORMAT,
                 note="`nvidia-smi --query-gpu=name,compute_cap --format=csv`")]
