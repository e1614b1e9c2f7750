"""``nvcc --version`` and ``gcc --version`` / ``g++ --version`` / ``gcc -v`` output.

Input: the cleaned lines and the line numbers other parsers took. Output: nvcc (from
"Cuda compilation tools, release 12.1, V12.1.105" → "12.1.105", else the build line
"Build cuda_12.3.r12.3/compiler.…" → "12.3") and gcc (the first line's version).
"""

from __future__ import annotations

import re

from envgen.doctor.reports._lines import Extracted, Line, fact

_RELEASE = re.compile(r"Cuda compilation tools, release (\d+\.\d+), V(\d+\.\d+(?:\.\d+)?)")
_BUILD = re.compile(r"\bcuda_(\d+\.\d+)\.r\d+\.\d+/compiler\.")
_GCC = re.compile(r"^(?:\S+/)?(?:gcc|g\+\+|cc|c\+\+|x86_64-linux-gnu-gcc|x86_64-conda-linux-gnu-"
                  r"(?:cc|gcc|c\+\+|g\+\+))(?:-\d+)?(?:\.exe)? \(.*\) (\d+\.\d+(?:\.\d+)?)"
                  r"(?: \d{8}(?: \([^)]*\))?)?\s*$")
_GCC_V = re.compile(r"^gcc version (\d+\.\d+(?:\.\d+)?) ")


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    for i, line in enumerate(lines):
        if line.number in claimed:
            continue
        release = _RELEASE.search(line.text)
        build = _BUILD.search(line.text)
        gcc = _GCC.match(line.text) or _GCC_V.match(line.text)
        if release:
            claimed.add(line.number)
            out.append(fact(line, "nvcc", release.group(2), "nvcc_version"))
        elif build and not _has_release(lines, i):
            claimed.add(line.number)
            out.append(fact(line, "nvcc", build.group(1), "nvcc_version",
                            note="from nvcc's build line"))
        elif gcc:
            claimed.add(line.number)
            out.append(fact(line, "gcc", gcc.group(1), "gcc_version"))
    return out


def _has_release(lines: list[Line], i: int) -> bool:
    return any(_RELEASE.search(lines[j].text) for j in range(max(0, i - 2), i))
