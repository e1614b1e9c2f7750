"""Error messages in pasted logs that state facts.

Input: the cleaned lines and the line numbers other parsers took. Output: the facts stated:
- DeepSpeed's CUDA check (op_builder/builder.py): "Installed CUDA version 11.8 does not match
  the version torch was compiled with 12.1" → nvcc 11.8 (CUDA_HOME's), torch_cuda 12.1;
  torch's "The detected CUDA version (12.1) mismatches the version that was used to compile
  PyTorch (11.8)" likewise;
- "fatal error: libaio.h: No such file or directory" → libaio.headers false;
- "Ninja is required to load C++ extensions" → ninja null (torch ran ``ninja --version``);
- "CUDA_HOME environment variable is not set" and DeepSpeed's "MissingCUDAException: CUDA_HOME
  does not exist" → cuda_home and nvcc null; "No CUDA runtime is found,
  using CUDA_HOME='/usr/local/cuda'" → cuda_home; "No such file or directory:
  '/usr/local/cuda/bin/nvcc'" → nvcc null and that cuda_home; "nvcc: not found" → nvcc null;
- "ImportError: …/fused_adam.so: undefined symbol: _ZN…", "No module named 'x'" →
  import_errors;
- nvcc's "unsupported GNU version! gcc versions later than 11 are not supported" and torch's
  "We need GCC 9 or later" say the host gcc is outside a range, not its version: the fact is
  explain only, the line is kept (``gcc_new`` / ``gcc_old``, below).

Every error line recognised is also kept as ``errors.<id>`` = the line as pasted, so the judge
can rank the finding that explains it first and quote it: ``cuda_mismatch``, ``libaio_h``,
``ninja``, ``apex_cuda``, ``driver_old``, ``gpu_capability``, ``gcc_new``, ``gcc_old``, and lines
that state no other fact:
- ``glibc``: the loader's "version `GLIBC_2.14' not found (required by …)";
- ``glibcxx``: "version `GLIBCXX_3.4.29' not found" / "`CXXABI_1.3.13' not found" (libstdc++);
- ``cxx_std``: torch's "#error C++17 or later compatible compiler is required to use PyTorch."
  and "#error You need C++17 to compile PyTorch";
- ``thc``: "THC/THCDeviceUtils.cuh: No such file or directory" (torch ≥ 1.11 has no THC);
- ``aio_lib``: MSVC's "LNK1181 … aio.lib" / "cufile.lib" (DeepSpeed's Linux-only ops on Windows);
- ``shm``: "exitcode: -7", "Bus error", "SIGBUS", "signal 7" (text-generation-inference's
  launcher: "Download process was signaled to shutdown with signal 7"), DataLoader's
  "insufficient shared memory (shm)", and prose that blames it ("shared memory is not enough",
  "docker limits shm");
- ``thc_named``: THC headers named outside an error line ("change THC/THCDeviceUtils.cuh to …");
- ``driver_old``: torch's "The NVIDIA driver on your system is too old (found version 11060)" —
  the number is the CUDA version the driver supports, 1000 × major + 10 × minor (NVIDIA's CUDA
  Driver API, cuDriverGetVersion: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VERSION.html),
  kept for explain as ``driver_max_cuda`` — and the runtime's "CUDA driver version is
  insufficient for CUDA runtime version" (cudaErrorInsufficientDriver);
- ``gpu_capability``: torch's "NVIDIA A100 … with CUDA capability sm_80 is not compatible with the
  current PyTorch installation." and "The current PyTorch install supports CUDA capabilities
  sm_37 sm_50 …" → gpus (name, capability) and torch_arch_list; older torch's "Found GPU0 GeForce
  GT 730 which is of cuda capability 3.5. PyTorch no longer supports this GPU because it is too
  old." → gpus (torch prints it over two lines: they are read as one);
- ``no_kernel``: "no kernel image is available for execution on the device", "invalid device
  function" (the code was not compiled for this GPU's architecture);
- ``nvcc_arch``: "nvcc fatal : Unsupported gpu architecture 'compute_86'", also without the
  "nvcc fatal :" prefix or its colon (a title, a quote);
- ``gcc_new`` / ``gcc_old``: the host compiler lines above (the fact stays explain only);
- ``apex_cuda``: apex's "Cuda extensions are being compiled with a version of Cuda that does not
  match the version used to compile Pytorch binaries. Pytorch binaries were compiled with Cuda
  10.2." → torch_cuda;
- ``std_flag``: a compiler command with ``-std=c++14`` (or 11) — an op compiled with that
  standard;
- ``cuda_unavailable``: collect_env's "Is CUDA available: False", "torch.cuda.is_available()
  returns False", DeepSpeed's "Setting accelerator to CPU. If you have GPU or other accelerator,
  we were unable to detect it.";
- ``no_nvcc``: the nvcc lines above (CUDA_HOME not found, "…/bin/nvcc" missing, "nvcc: not
  found");
- ``nccl_shm``: NCCL's "Call to posix_fallocate failed : No space left on device" / "failed to
  extend /dev/shm/nccl-… to N bytes" (/dev/shm has no room for NCCL's segment), and NCCL's
  "Error while creating shared memory segment /dev/shm/nccl-… (size N)" without an errno (NCCL
  2.12 … 2.21 print none; the rule reads that one as a likely, not a proven, full /dev/shm;
  not after NCCL's "Cuda failure" line, which says cudaHostRegister failed instead);
  ``torch_shm``:
  torch's "unable to write to file </torch_18693_1954506624>" (a shared tensor that /dev/shm
  has no room for);
- ``pip_no_match``: pip's "No matching distribution found for torch==1.10.0+cu113" (no file for
  this Python or platform);
- ``std_function``: "std_function.h:435:145: error: parameter packs not expanded with '...'" (an
  nvcc that fails on gcc 11's headers: curated/doctor.toml [[nvcc_bug]]);
- ``python_h``: "fatal error: Python.h: No such file or directory" (the interpreter's
  development headers are missing);
- ``torch_cpu``: torch's "AssertionError: Torch not compiled with CUDA enabled" (a CPU-only
  torch build asked for CUDA);
- ``torch_abi``: an undefined symbol of torch's own C++ namespaces (``_ZN3c10…``, ``_ZN2at…``,
  ``_ZN5torch…``) in a compiled extension outside torch: it was built against another torch
  (the ``import_errors`` fact is kept as well); ``nccl_symbol``: an undefined ``nccl…`` symbol,
  in torch's own library, in an extension's ("…/deep_ep/_C….so: undefined symbol:
  ncclGetLsaDevicePointer") or named alone ("undefined symbol ncclCommRegister"): the libnccl
  loaded lacks a function the library was built against;
- ``ext_build``: a failed extension build ("error: command '/usr/local/cuda/bin/nvcc' failed with
  exit code 1", torch's "Error compiling objects for extension", "Error building extension
  'fused_adam'", the ninja run torch's cpp_extension starts: "Command '['ninja', '-v']' returned
  non-zero exit status 1", ninja's own "ninja: build stopped: subcommand failed", a traceback
  through flash-attn's setup.py get_cuda_bare_metal_version, which runs nvcc -V, any other
  "nvcc fatal :" line): the paste is from a build, so the nvcc-against-torch checks apply;
- ``sem_shm``: "OSError: [Errno 28] No space left on device" below a traceback through
  multiprocessing's SemLock (a named semaphore lives in /dev/shm);
- ``container_cuda``: nvidia-container-cli's "requirement error: unsatisfied condition:
  cuda>=12.8, please update your driver …": the image needs a CUDA the driver does not support.
"""

from __future__ import annotations

import re
from dataclasses import replace

from envgen.doctor.reports._lines import Extracted, Line, fact, near

FORMAT = "error"
# (a title may end "… does not match torch version": the installed CUDA only)
_DS_CUDA = re.compile(r"Installed CUDA version (\d+\.\d+) does not match (?:the version torch "
                      r"was compiled with (\d+\.\d+)|torch)", re.I)
_ACCEPTED = re.compile(r"\s*but since the APIs are compatible, accepting this combination", re.I)
# (a title may drop "The detected")
_TORCH_CUDA = re.compile(r"CUDA version \((\d+\.\d+)\) mismatches the version that "
                         r"was used to compile\s*PyTorch \((\d+\.\d+)\)")
_LIBAIO_H = re.compile(r"fatal error: libaio\.h: No such file or directory")
# DeepSpeed's MissingCUDAException: torch found no CUDA_HOME (no variable, no nvcc on PATH, no
# /usr/local/cuda); torch's own "CUDA_HOME environment variable is not set" says the same
_MISSING_CUDA = re.compile(r"CUDA_HOME does not exist, unable to compile CUDA op", re.I)
_NINJA = re.compile(r"Ninja is required to load C\+\+ extensions")
_NO_CUDA_HOME = re.compile(r"CUDA_HOME environment variable is not set")
_CUDA_HOME = re.compile(r"No CUDA runtime is found, using CUDA_HOME='([^']+)'")
# the build ran an nvcc that is not there: CUDA_HOME's ("No such file or directory:
# '/usr/local/cuda/bin/nvcc'", DeepSpeed's installed_cuda_version and torch's extension
# build; setuptools' "command ':/usr/local/cuda-11.1/bin/nvcc' failed: No such file or
# directory"), or PATH's (sh's "nvcc: not found", bash's "nvcc: command not found")


class _NoNvccAt:
    """The folder of a missing "<home>/bin/nvcc": the literal first, then the path before it
    (a path pattern searched from every position backtracks quadratically on a long line)."""

    _AT = re.compile(r"/bin/nvcc(?:\.exe)?'?(?:\s+failed)?:\s*No such file or directory|"
                     r"(?<=No such file or directory: ')[^']*?/bin/nvcc(?:\.exe)?'", re.I)
    _HOME = re.compile(r"[^'\s]*$")

    def search(self, text: str) -> str | None:
        m = self._AT.search(text)
        if m is None:
            return None
        if m.group(0).startswith("/bin/nvcc"):
            start = max(0, m.start() - 4096)
            return self._HOME.search(text, start, m.start()).group(0)
        return m.group(0)[:m.group(0).lower().rindex("/bin/nvcc")]


_NO_NVCC_AT = _NoNvccAt()
# (and as reporters write it: "nvcc-not-found error", "nvcc does not exists in … image")
_NO_NVCC = re.compile(r"(?:^|[\s:])nvcc(?:\.exe)?: (?:command )?not found\b|(?<![\w/.-])nvcc[- ]"
                      r"(?:not[- ]found|does not exists?|is not installed)\b", re.I)


class _Undefined:
    """"<library>.so: undefined symbol: <name>" after "ImportError: " / "OSError: ", or alone
    (a title, a tool's line) when the name is in torch's C++ namespaces: (library, "undefined
    symbol: <name>"). The symbol first, then the word before it (a path pattern searched from
    every position backtracks quadratically on a long line)."""

    _AT = re.compile(r": (undefined symbol: \S+)")
    _LIBRARY = re.compile(r".+\.(?:so|pyd)(?:\.\d+)*")

    def search(self, text: str) -> tuple[str, str] | None:
        m = self._AT.search(text)
        if m is None:
            return None
        words = text[max(0, m.start() - 4096):m.start()].split()
        if not words or not self._LIBRARY.fullmatch(words[-1].lstrip("`'\"")):
            return None
        if not (len(words) > 1 and words[-2] in ("ImportError:", "OSError:")) and \
                not _TORCH_SYMBOL.search(m.group(1)):
            return None  # alone, only a symbol of torch's C++ API says what failed to load
        return words[-1].lstrip("`'\""), m.group(1)


_UNDEFINED = _Undefined()
_NO_MODULE = re.compile(r"^[`'\"\s>]*(?:ModuleNotFoundError|ImportError): No module named "
                        r"'([\w.]+)'")
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
# "signal 7" is SIGBUS on Linux (x86, ARM): text-generation-inference's launcher prints the
# number ("Download process was signaled to shutdown with signal 7", launcher/src/main.rs)
_SHM = re.compile(r"(?:exit\s?code|return code|exit status)\s*[:=]?\s*-7\b|\bSIGBUS\b|\bBus error\b"
                  r"|insufficient shared memory \(shm\)|\bsignal\s?7\b(?!\.\d)", re.I)
# NCCL's own lines when /dev/shm has no room for its segment (src/misc/shmutils.cc,
# include/shm.h); "Error while creating shared memory segment" with another errno has other
# causes and is not read; without an errno (NCCL 2.12 … 2.21 print none, see SEGMENT) it is read,
# and the rule weighs it as a likely cause only
_NCCL_SHM = re.compile(r"posix_fallocate failed\s*:\s*No space left on device|failed to extend "
                       r"/dev/shm/\S+ to \d+ bytes|Error while creating shared memory segment "
                       r"\S+ \(size \d+\), error: No space left on device|Error while creating "
                       r"shared memory segment\s+/dev/shm/\S+\s*\(size\s*\d+\)(?!\s*,?\s*error)",
                       re.I)
# that line without the errno: which call failed is not said (open, fallocate, mmap or
# cudaHostRegister in NCCL 2.21.5's ncclShmOpen, the segment's WARN after each)
SEGMENT = re.compile(r"Error while creating shared memory segment\s+/dev/shm/\S+\s*"
                     r"\(size\s*\d+\)(?!\s*,?\s*error)", re.I)
# ncclShmOpen's CUDACHECKGOTO just before it: cudaHostRegister failed, not /dev/shm
# (NVIDIA/nccl#1518: "NCCL WARN Cuda failure 'invalid argument'", /dev/shm not full)
_CUDA_FAILURE = re.compile(r"\bCuda failure\b", re.I)
# torch.multiprocessing writing a shared tensor into /dev/shm (DataLoader workers): "unable to
# write to file </torch_18693_1954506624>" (pytorch#3948: out of shared memory)
_TORCH_SHM = re.compile(r"unable to write to file </torch_\d+_\d+(?:_\d+)?>", re.I)
_SHM_PROSE = re.compile(r"(?:shared memory|\bshm\b).{0,24}(?:insufficient|not enough|too small|"
                        r"不够|不足)|(?:insufficient|not enough|too little)\s.{0,24}"
                        r"(?:shared memory|\bshm\b)|(?:docker|container)\S*\s?.{0,24}"
                        r"(?:limit|限制)\S*\s?.{0,12}(?:/dev/shm|\bshm\b|shared memory)", re.I)
_THC_NAMED = re.compile(rf"\b{_THC_H}\b|\bTHC\b.{{0,40}}\bnot compatible", re.I)
_DRIVER_OLD = re.compile(r"NVIDIA driver on your system is too old \(found version (\d{4,6})\)",
                         re.I)
# the same message cut before "(found version …)" (a title, a short quote)
_DRIVER_OLD_BARE = re.compile(r"NVIDIA driver on your system is too old", re.I)
_INSUFFICIENT = re.compile(r"CUDA driver version is insufficient for CUDA runtime version", re.I)
_CAPABILITY = re.compile(r"(?:^|:\s)\s*([^:]*?\S) with CUDA capability sm_(\d{2,3})[a-z]? is not "
                         r"compatible with the current PyTorch installation", re.I)
_SUPPORTS = re.compile(r"The current PyTorch install supports CUDA capabilities\s+"
                       r"((?:(?:sm|compute)_\d{2,3}[a-z]?\s*)+)", re.I)
_TOO_OLD_GPU = re.compile(r"Found GPU\s?\d+ (.{1,80}?) which is of cuda capability (\d+\.\d+)\.?\s*"
                          r"PyTorch no longer supports this GPU because it is too old", re.I)
_NO_KERNEL = re.compile(r"no kernel image is available for execution on the device|"
                        r"\binvalid device function\b", re.I)
# nvcc's "nvcc fatal   : Unsupported gpu architecture 'compute_86'", also quoted without the
# prefix or its colon ("nvcc fatal unsupported gpu architecture 'compute_86'", a title)
_NVCC_ARCH = re.compile(r"(?:\bnvcc fatal\s*:?\s*)?\bUnsupported gpu architecture\s+"
                        r"[`'‘\"]?(?:compute|sm)_(\d{2,3})[a-z]?", re.I)
_APEX_CUDA = re.compile(r"Cuda extensions are being compiled with a version of Cuda that does not "
                        r"match the version used to compile Pytorch binaries\.?\s*(?:Pytorch "
                        r"binaries were compiled with Cuda (\d+\.\d+))?", re.I)
class _CompilerStd:
    """A compiler command passing -std=c++14 (or 11): the flag first, then a compiler word
    before it — one regex holding both backtracks quadratically on a long pasted line."""

    _FLAG = re.compile(r"\s-std=(?:c|gnu)\+\+(?:11|14|0x|1y)\b")
    _COMPILER = re.compile(r"(?:^|[\s/-])(?:gcc|g\+\+|c\+\+|nvcc|clang\+\+)(?:-\d+)?\s")

    def search(self, text: str) -> re.Match[str] | None:
        flag = self._FLAG.search(text)
        return flag if flag and self._COMPILER.search(text, 0, flag.start() + 1) else None


_STD_FLAG = _CompilerStd()
# DeepSpeed (accelerator/real_accelerator.py, 0.14.1 on) falls back to its CPU accelerator with
# the warning below when torch has no usable CUDA device (or cannot be imported)
_UNAVAILABLE = re.compile(r"Is CUDA available:\s*False\b|cuda\.is_available\(\)\W{0,3}"
                          r"(?:\w+\s){0,2}\W{0,3}False\b|Setting accelerator to CPU\. If you have "
                          r"GPU or other accelerator, we were unable to detect it", re.I)
_STD_FUNCTION = re.compile(r"std_function\.h:\d+:\d+: error: parameter packs not expanded with",
                           re.I)
_PYTHON_H = re.compile(r"\bPython\.h:\s*No such file or directory", re.I)
_TORCH_CPU = re.compile(r"Torch not compiled with CUDA enabled", re.I)
# an Itanium-mangled name in torch's namespaces: c10, at (ATen), torch, caffe2 (N, then an
# optional const/volatile qualifier K/V, then the namespace's length-prefixed name)
_TORCH_SYMBOL = re.compile(r"undefined symbol:\s*_ZN[KV]?(?:3c10|2at|5torch|6caffe2)")
# an undefined NCCL function (ncclCommRegister, its pnccl… alias), after "undefined symbol" with
# or without the colon: the libnccl loaded lacks it, whichever library asked
_NCCL_SYMBOL = re.compile(r"(?i:\bundefined symbol)\s*:?\s*[`'\"]?(p?nccl[A-Z]\w*)")
# a C++/CUDA extension build that failed, whichever extension (setuptools' nvcc command, torch's
# cpp_extension): the text is from a build, so the build-time rules apply
_EXT_BUILD = re.compile(r"error: command '[^']*nvcc(?:\.exe)?' failed with exit (?:status|code) "
                        r"\d+|Error compiling objects for extension|Error building extension "
                        r"'[\w.-]+'|ninja: build stopped: subcommand failed|Command '\['ninja', "
                        r"'-v'(?:, '-j', '\d+')?\]' returned non-zero exit status|"
                        r"in get_cuda_bare_metal_version\b|\bnvcc fatal\s*:", re.I)
# nvidia-container-cli (libnvidia-container src/cli/dsl.c): the image's NVIDIA_REQUIRE_CUDA
# "cuda>=12.8" is more than the driver supports
_CONTAINER_CUDA = re.compile(r"unsatisfied condition: cuda\s*>=\s*(\d+\.\d+)")
# multiprocessing's SemLock creates a POSIX named semaphore, which Linux keeps in /dev/shm
# (sem_overview(7)): its "No space left on device" is a full /dev/shm (Megatron-LM#878)
_NO_SPACE = re.compile(r"\[Errno 28\] No space left on device")
_SEMLOCK = re.compile(r"\bSemLock\b")
_PIP_NO_MATCH = re.compile(r"No matching distribution found for (torch|deepspeed|colossalai|"
                           r"megatron[-_]core)\b", re.I)
# error id → the pattern of a line that states it and no snapshot fact besides
_LINES = (("nccl_shm", _NCCL_SHM), ("torch_shm", _TORCH_SHM), ("glibc", _GLIBC),
          ("glibcxx", _GLIBCXX), ("cxx_std", _CXX_STD), ("thc", _THC),
          ("aio_lib", _AIO_LIB), ("shm", _SHM), ("no_kernel", _NO_KERNEL),
          ("nvcc_arch", _NVCC_ARCH), ("std_flag", _STD_FLAG), ("cuda_unavailable", _UNAVAILABLE),
          ("pip_no_match", _PIP_NO_MATCH), ("std_function", _STD_FUNCTION),
          ("python_h", _PYTHON_H), ("torch_cpu", _TORCH_CPU), ("nccl_symbol", _NCCL_SYMBOL),
          ("shm", _SHM_PROSE),
          ("thc_named", _THC_NAMED), ("ext_build", _EXT_BUILD),
          ("container_cuda", _CONTAINER_CUDA))
_LONGEST = 300
# messages that pip's indented output (or the terminal) wraps, cut where the rest is on the
# next line: a symbol after "undefined symbol:", torch's "…used to compile" / "PyTorch (12.1).",
# torch's old-GPU warning, whose text holds a newline after "… cuda capability 5.0."
_WRAPPED = re.compile(r"undefined symbol:$|mismatches the version that was used to compile$|"
                      r"which is of cuda capability \d+\.\d+\.?$", re.I)


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    seen: set[str] = set()
    for i, line in enumerate(lines):
        # a line another parser took is read too: an error can share a line with what it
        # quotes (apex prints nvcc's banner and its own mismatch line as one)
        taken = [line.number]
        if _WRAPPED.search(line.text) and i + 1 < len(lines):  # the message goes on below
            line = replace(line, text=f"{line.text} {lines[i + 1].text}")
            taken.append(lines[i + 1].number)
        found = [e for e in _one(line, lines[i + 1:i + 3]) if e.fact not in seen]
        if any(e.fact == "errors.nccl_shm" for e in found) and SEGMENT.search(line.text) and \
                near(lines, i, _CUDA_FAILURE, 4, 0):
            found = [e for e in found if e.fact != "errors.nccl_shm"]  # the CUDA call failed
        if not found and "errors.sem_shm" not in seen and _NO_SPACE.search(line.text) and \
                near(lines, i, _SEMLOCK, 8, 0):
            found = [fact(line, "errors.sem_shm", _excerpt(line.source, 0), FORMAT)]
        seen.update(e.fact for e in found if e.fact.startswith("errors."))  # its first line only
        if found:
            claimed.update(taken)
            out.extend(found)
    return out


def _one(line: Line, after: list[Line]) -> list[Extracted]:
    found, error = _facts(line, after)
    at = 0
    if error is None and not found:
        for error_id, pattern in _LINES:
            m = pattern.search(line.text)
            if m:
                error, at = error_id, m.end()
                break
    if error:
        found.append(fact(line, f"errors.{error}", _excerpt(line.source, at), FORMAT))
    return found


def _excerpt(source: str, at: int) -> str:
    """``source`` when short, else _LONGEST characters of it that end with its match (which
    ends at ``at`` in the cleaned text: near the same place in the source)."""
    if len(source) <= _LONGEST:
        return source
    if at <= _LONGEST - 1:
        return source[:_LONGEST - 1] + "…"
    end = min(len(source), at + 40)
    return "…" + source[end - _LONGEST + 2:end] + ("…" if end < len(source) else "")


def _cc(digits: str) -> str:
    """"80" → "8.0", "120" → "12.0": torch's sm_XY as a compute capability."""
    return f"{digits[:-1]}.{digits[-1]}"


def _facts(line: Line, after: list[Line]) -> tuple[list[Extracted], str | None]:
    """The facts ``line`` states and the id of the error it is (None: not one of those)."""
    text = line.text
    cuda = _DS_CUDA.search(text) or _TORCH_CUDA.search(text)
    if cuda:
        # DeepSpeed's "… but since the APIs are compatible, accepting this combination" is a
        # warning it went past (op_builder/builder.py), not the error
        accepted = bool(_ACCEPTED.search(text, cuda.end()))
        return [fact(line, "nvcc", cuda.group(1), FORMAT,
                     note="the CUDA toolkit of CUDA_HOME, major.minor"),
                *([fact(line, "torch_cuda", cuda.group(2), FORMAT)] if cuda.group(2) else [])], \
            None if accepted else "cuda_mismatch"
    apex = _APEX_CUDA.search(text)
    if apex:
        return ([fact(line, "torch_cuda", apex.group(1), FORMAT)] if apex.group(1) else []), \
            "apex_cuda"
    if _LIBAIO_H.search(text):
        return [fact(line, "libaio.headers", False, FORMAT)], "libaio_h"
    if _NINJA.search(text):
        return [fact(line, "ninja", None, FORMAT, note="torch found no ninja binary")], "ninja"
    if _NO_CUDA_HOME.search(text) or _MISSING_CUDA.search(text):
        return [fact(line, "cuda_home", None, FORMAT),
                fact(line, "nvcc", None, FORMAT, note="torch found no CUDA_HOME: no variable, "
                     "no nvcc on PATH, no /usr/local/cuda")], "no_nvcc"
    home = _CUDA_HOME.search(text)
    if home:
        return [fact(line, "cuda_home", home.group(1), FORMAT)], None
    home = _NO_NVCC_AT.search(text)
    if home is not None:
        return [fact(line, "nvcc", None, FORMAT, note=f"no nvcc at {home}/bin"),
                fact(line, "cuda_home", home, FORMAT,
                     note="the folder the build took for CUDA_HOME")], "no_nvcc"
    if _NO_NVCC.search(text):
        return [fact(line, "nvcc", None, FORMAT, note="the shell found no nvcc on PATH")], \
            "no_nvcc"
    undefined = _UNDEFINED.search(text)
    if undefined:
        library, symbol = undefined
        path = library.replace("\\", "/")
        ours = "/torch/lib/" in path or "/torch/_C" in path  # torch's own libraries
        error = ("torch_abi" if _TORCH_SYMBOL.search(symbol) and not ours else
                 "nccl_symbol" if _NCCL_SYMBOL.search(symbol) else None)
        return [fact(line, f"import_errors.{module_of(library)}", symbol, FORMAT)], error
    missing = _NO_MODULE.search(text)
    if missing:
        return [fact(line, f"import_errors.{missing.group(1)}",
                     f"No module named '{missing.group(1)}'", FORMAT)], None
    gnu = _GNU.search(text)
    if gnu:
        return [fact(line, "host_compiler_rejected", f"gcc newer than {gnu.group(1)}", FORMAT,
                     kept=False, note="nvcc rejects the host gcc as newer than "
                     f"{gnu.group(1)}; it does not say which version")], "gcc_new"
    old = _OLD_GCC.search(text)
    if old:
        return [fact(line, "host_compiler_rejected", f"gcc older than {old.group(1)}", FORMAT,
                     kept=False, note="torch's headers reject the host gcc as older than "
                     f"{old.group(1)}; it does not say which version")], "gcc_old"
    supports = driver_cuda(text)
    if supports:
        return [fact(line, "driver_max_cuda", supports, FORMAT, kept=False,
                     note=f"the driver supports CUDA ≤ {supports} (torch's 'found version' is "
                     "1000 × major + 10 × minor)")], "driver_old"
    if _INSUFFICIENT.search(text) or _DRIVER_OLD_BARE.search(text):
        return [], "driver_old"
    capability = _CAPABILITY.search(text)
    if capability:
        name = capability.group(1).rsplit("UserWarning:", 1)[-1].strip(" :`'\"")
        out = [fact(line, "gpus", ({"name": name, "compute_capability": _cc(capability.group(2))},),
                    FORMAT, note="torch's capability warning")]
        supports = next((m for m in (_SUPPORTS.search(x.text) for x in [line, *after]) if m),
                        None)
        if supports:
            out.append(fact(line, "torch_arch_list", tuple(supports.group(1).split()), FORMAT,
                            note="the archs torch's warning lists"))
        return out, "gpu_capability"
    too_old = _TOO_OLD_GPU.search(text)
    if too_old:
        return [fact(line, "gpus", ({"name": too_old.group(1).strip(),
                                     "compute_capability": too_old.group(2)},), FORMAT,
                     note="torch's 'no longer supports this GPU' warning")], "gpu_capability"
    return [], None


def module_of(path: str) -> str:
    """The module a shared object is: ".../site-packages/deepspeed/ops/x_op.cpython-38-….so"
    → "deepspeed.ops.x_op"; ".../torch_extensions/py310_cu117/fused_adam/fused_adam.so" →
    "fused_adam"."""
    path = path.replace("\\", "/")
    tail = path.split("site-packages/", 1)[1] if "site-packages/" in path else \
        path.rsplit("/", 1)[-1]
    stem = re.sub(r"(?:\.cpython-[^/]*|\.cp\d+-[^/]*|\.abi3)?\.(?:so|pyd)(?:\.\d+)*$", "", tail)
    return stem.replace("/", ".")


def driver_cuda(line: str) -> str | None:
    """The CUDA version a driver supports from torch's "too old (found version 11060)" line:
    "11.6" (cuDriverGetVersion's 1000 × major + 10 × minor), or None."""
    m = _DRIVER_OLD.search(line)
    if not m:
        return None
    number = int(m.group(1))
    return f"{number // 1000}.{number % 1000 // 10}"


def container_cuda(line: str) -> str | None:
    """The CUDA an image requires from nvidia-container-cli's "requirement error: unsatisfied
    condition: cuda>=12.8" ("12.8"), or None."""
    m = _CONTAINER_CUDA.search(line)
    return m.group(1) if m else None


def arch_of(line: str) -> str | None:
    """The sm_XY an "Unsupported gpu architecture 'compute_86'" line names, or None."""
    m = _NVCC_ARCH.search(line)
    return f"sm_{m.group(1)}" if m else None


def nccl_symbol_of(line: str) -> tuple[str | None, str] | None:
    """The library and the NCCL function of an "undefined symbol" line: ("/…/deep_ep/_C….so",
    "ncclGetLsaDevicePointer"); (None, "ncclCommRegister") when no library is named; None when
    the line names no NCCL function."""
    m = _NCCL_SYMBOL.search(line)
    if not m:
        return None
    words = line[max(0, m.start() - 4096):m.start()].split()
    library = words[-1].strip("`'\"").rstrip(":") if words else ""
    return (library if _Undefined._LIBRARY.fullmatch(library) else None), m.group(1)


def std_of(line: str) -> int | None:
    """The C++ standard a compiler line passes with -std (14 for c++14 / c++1y), or None."""
    m = re.search(r"\s-std=(?:c|gnu)\+\+(11|14|0x|1y)\b", line)  # the kept line may be cut
    if not m:
        return None
    return {"0x": 11, "1y": 14}.get(m.group(1)) or int(m.group(1))
