"""Error messages in pasted logs that state facts.

Input: the cleaned lines and the line numbers other parsers took. Output: the facts stated:
- DeepSpeed's CUDA check (op_builder/builder.py): "Installed CUDA version 11.8 does not match
  the version torch was compiled with 12.1" → nvcc 11.8 (CUDA_HOME's), torch_cuda 12.1;
  torch's "The detected CUDA version (12.1) mismatches the version that was used to compile
  PyTorch (11.8)" likewise;
- "fatal error: libaio.h: No such file or directory" → libaio.headers false;
- "Ninja is required to load C++ extensions" → ninja null (torch ran ``ninja --version``);
- "CUDA_HOME environment variable is not set" → cuda_home null; "No CUDA runtime is found,
  using CUDA_HOME='/usr/local/cuda'" → cuda_home;
- "ImportError: …/fused_adam.so: undefined symbol: _ZN…", "No module named 'x'" →
  import_errors;
- nvcc's "unsupported GNU version! gcc versions later than 11 are not supported" and torch's
  "We need GCC 9 or later" say the host gcc is outside a range, not its version: explain only.
"""

from __future__ import annotations

import re
from dataclasses import replace

from envgen.doctor.reports._lines import Extracted, Line, fact

FORMAT = "error"
_DS_CUDA = re.compile(r"Installed CUDA version (\d+\.\d+) does not match the version torch was "
                      r"compiled with (\d+\.\d+)")
_TORCH_CUDA = re.compile(r"The detected CUDA version \((\d+\.\d+)\) mismatches the version that "
                         r"was used to compile\s*PyTorch \((\d+\.\d+)\)")
_LIBAIO_H = re.compile(r"fatal error: libaio\.h: No such file or directory")
_NINJA = re.compile(r"Ninja is required to load C\+\+ extensions")
_NO_CUDA_HOME = re.compile(r"CUDA_HOME environment variable is not set")
_CUDA_HOME = re.compile(r"No CUDA runtime is found, using CUDA_HOME='([^']+)'")
_UNDEFINED = re.compile(r"(?:ImportError|OSError): (\S+?\.(?:so|pyd)(?:\.\d+)*): (undefined "
                        r"symbol: \S+)")
_NO_MODULE = re.compile(r"^(?:ModuleNotFoundError|ImportError): No module named '([\w.]+)'")
_GNU = re.compile(r"unsupported GNU version! gcc versions later than (\d+) are not supported")
_OLD_GCC = re.compile(r"too old version of GCC\. We need GCC (\d+) or later")


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    for i, line in enumerate(lines):
        if line.number in claimed:
            continue
        if line.text.endswith("undefined symbol:") and i + 1 < len(lines):
            line = replace(line, text=f"{line.text} {lines[i + 1].text}")  # a wrapped symbol
        found = _one(line)
        if found:
            claimed.add(line.number)
            out.extend(found)
    return out


def _one(line: Line) -> list[Extracted]:
    text = line.text
    cuda = _DS_CUDA.search(text) or _TORCH_CUDA.search(text)
    if cuda:
        return [fact(line, "nvcc", cuda.group(1), FORMAT,
                     note="the CUDA toolkit of CUDA_HOME, major.minor"),
                fact(line, "torch_cuda", cuda.group(2), FORMAT)]
    if _LIBAIO_H.search(text):
        return [fact(line, "libaio.headers", False, FORMAT)]
    if _NINJA.search(text):
        return [fact(line, "ninja", None, FORMAT, note="torch found no ninja binary")]
    if _NO_CUDA_HOME.search(text):
        return [fact(line, "cuda_home", None, FORMAT)]
    home = _CUDA_HOME.search(text)
    if home:
        return [fact(line, "cuda_home", home.group(1), FORMAT)]
    undefined = _UNDEFINED.search(text)
    if undefined:
        return [fact(line, f"import_errors.{module_of(undefined.group(1))}",
                     undefined.group(2), FORMAT)]
    missing = _NO_MODULE.search(text)
    if missing:
        return [fact(line, f"import_errors.{missing.group(1)}",
                     f"No module named '{missing.group(1)}'", FORMAT)]
    gnu = _GNU.search(text)
    if gnu:
        return [fact(line, "host_compiler_rejected", f"gcc newer than {gnu.group(1)}", FORMAT,
                     kept=False, note="explain only: nvcc rejects the host gcc as newer than "
                     f"{gnu.group(1)}; it does not say which version")]
    old = _OLD_GCC.search(text)
    if old:
        return [fact(line, "host_compiler_rejected", f"gcc older than {old.group(1)}", FORMAT,
                     kept=False, note="explain only: torch's headers reject the host gcc as "
                     f"older than {old.group(1)}; it does not say which version")]
    return []


def module_of(path: str) -> str:
    """The module a shared object is: ".../site-packages/deepspeed/ops/x_op.cpython-38-….so"
    → "deepspeed.ops.x_op"; ".../torch_extensions/py310_cu117/fused_adam/fused_adam.so" →
    "fused_adam"."""
    path = path.replace("\\", "/")
    tail = path.split("site-packages/", 1)[1] if "site-packages/" in path else \
        path.rsplit("/", 1)[-1]
    stem = re.sub(r"(?:\.cpython-[^/]*|\.cp\d+-[^/]*|\.abi3)?\.(?:so|pyd)(?:\.\d+)*$", "", tail)
    return stem.replace("/", ".")
