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

Every error line recognised is also kept as ``errors.<id>`` = the line as pasted, so the judge
can rank the finding that explains it first and quote it: ``cuda_mismatch``, ``libaio_h``,
``ninja`` (the host compiler lines stay explain only), and lines that state no other fact:
- ``glibc``: the loader's "version `GLIBC_2.14' not found (required by …)";
- ``glibcxx``: "version `GLIBCXX_3.4.29' not found" / "`CXXABI_1.3.13' not found" (libstdc++);
- ``cxx_std``: torch's "#error C++17 or later compatible compiler is required to use PyTorch."
  and "#error You need C++17 to compile PyTorch";
- ``thc``: "THC/THCDeviceUtils.cuh: No such file or directory" (torch ≥ 1.11 has no THC);
- ``aio_lib``: MSVC's "LNK1181 … aio.lib" / "cufile.lib" (DeepSpeed's Linux-only ops on Windows);
- ``shm``: "exitcode: -7", "Bus error", "SIGBUS", DataLoader's "insufficient shared memory (shm)".
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
_Q = r"[`'‘’\"]?"
# the loader's line itself ("ImportError: /lib64/libc.so.6: version …"), not prose quoting it
_LOADER = r"^[`'\"\s]*(?:[\w.]+:\s+)*\S+\.so[.\d]*:\s+version\s+"
_GLIBC = re.compile(rf"{_LOADER}{_Q}GLIBC_(\d+(?:\.\d+)+){_Q}\s+not found", re.I)
_GLIBCXX = re.compile(rf"{_LOADER}{_Q}(GLIBCXX|CXXABI)_(\d+(?:\.\d+)+){_Q}\s+not found", re.I)
_CXX_STD = re.compile(r"#error\s+(?:C\+\+(\d+) or later compatible compiler is required to use "
                      r"(?:PyTorch|ATen)|You need C\+\+(\d+) to compile PyTorch)", re.I)
_THC_H = r"THC/\w+\.(?:cuh|h)"
_THC = re.compile(rf"{_Q}{_THC_H}{_Q}:?\s*No such file|missing\s+{_Q}{_THC_H}\b", re.I)
_AIO_LIB = re.compile(r"\bLNK1181\b.*\b(?:aio|cufile)\.lib", re.I)
_SHM = re.compile(r"(?:exit\s?code|return code|exit status)\s*[:=]?\s*-7\b|\bSIGBUS\b|\bBus error\b"
                  r"|insufficient shared memory \(shm\)", re.I)
# error id → the pattern of a line that states it and no snapshot fact besides
_LINES = (("glibc", _GLIBC), ("glibcxx", _GLIBCXX), ("cxx_std", _CXX_STD), ("thc", _THC),
          ("aio_lib", _AIO_LIB), ("shm", _SHM))
_LONGEST = 300


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    seen: set[str] = set()
    for i, line in enumerate(lines):
        if line.number in claimed:
            continue
        if line.text.endswith("undefined symbol:") and i + 1 < len(lines):
            line = replace(line, text=f"{line.text} {lines[i + 1].text}")  # a wrapped symbol
        found = [e for e in _one(line) if e.fact not in seen]  # an error's first line only
        seen.update(e.fact for e in found if e.fact.startswith("errors."))
        if found:
            claimed.add(line.number)
            out.extend(found)
    return out


def _one(line: Line) -> list[Extracted]:
    found = _facts(line)
    error = _error_id(line, found)
    if error:
        shown = line.source if len(line.source) <= _LONGEST else line.source[:_LONGEST - 1] + "…"
        found.append(fact(line, f"errors.{error}", shown, FORMAT))
    return found


def _error_id(line: Line, found: list[Extracted]) -> str | None:
    """The id of the error ``line`` states (see the module docstring), or None."""
    facts = {e.fact for e in found}
    if "torch_cuda" in facts:
        return "cuda_mismatch"
    if "libaio.headers" in facts:
        return "libaio_h"
    if "ninja" in facts:
        return "ninja"
    if found:
        return None
    return next((error for error, pattern in _LINES if pattern.search(line.text)), None)


def _facts(line: Line) -> list[Extracted]:
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
