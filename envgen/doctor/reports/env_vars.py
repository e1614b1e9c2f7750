"""Assignments of the build variables the doctor judges, as people paste them.

Input: the cleaned lines and the line numbers other parsers took. Output: ``env.<NAME>`` facts
(the snapshot's ``env``, as the live collector records it) for ``TORCH_CUDA_ARCH_LIST``, from:
``export TORCH_CUDA_ARCH_LIST="8.0;9.0a"``, an inline ``TORCH_CUDA_ARCH_LIST=9.0a pip install
…``, a Dockerfile's ``ENV TORCH_CUDA_ARCH_LIST="9.0"``, cmd's ``set TORCH_CUDA_ARCH_LIST=9.0``,
PowerShell's ``$env:TORCH_CUDA_ARCH_LIST = "9.0"`` and ``TORCH_CUDA_ARCH_LIST: 9.0`` (YAML, an
env dump). A line may be one another parser took (an install command): the assignment is read
too. The first assignment wins; a later one is kept for explain only.
"""

from __future__ import annotations

import re

from envgen.doctor.reports._lines import Extracted, Line, fact

FORMAT = "env_var"
NAMES = ("TORCH_CUDA_ARCH_LIST",)
# NAME, then = or : (spaces allowed around it), then a quoted value or a bare one
_ASSIGN = re.compile(r"(?:^|[\s;:`(])(?:export\s+|ENV\s+|set\s+|\$env:)?"
                     rf"({'|'.join(NAMES)})\s*[=:]\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'`;]+))")
# an entry: "8.0", "9.0a", "10.0f", "8.6+PTX", "sm_90" (as some scripts write it)
_ENTRY = re.compile(r"^(?:\d+\.\d+[af]?(?:\+PTX)?|sm_\d+[af]?)$", re.I)


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    seen: set[str] = set()
    for line in lines:
        for m in _ASSIGN.finditer(line.text):
            name = m.group(1)
            value = next(g for g in m.groups()[1:] if g is not None).strip()
            entries = [e for e in re.split(r"[;\s]+", value) if e]
            if not entries or not all(_ENTRY.match(e) for e in entries):
                continue  # a placeholder ("$ARCHS") or prose, not an arch list
            out.append(fact(line, f"env.{name}", value, FORMAT, kept=name not in seen,
                            note="" if name not in seen else "an earlier assignment is kept"))
            seen.add(name)
    return out
