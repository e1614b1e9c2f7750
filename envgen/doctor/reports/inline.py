"""Pins written inline in prose: "My environment is `pytorch==1.7.1+cu110` and
`deepspeed==0.6.5`", "`DeepSpeed==0.3.13`".

Input: the cleaned lines and the line numbers other parsers took. Output: torch and the
frameworks' versions, only for an explicit ``name==version`` of torch (or conda's name,
pytorch) and the three frameworks: other names in prose are too often not what is installed.
Ranked below the package lists; a line that runs an install command states what was asked
for, not what is installed, and is skipped.
"""

from __future__ import annotations

import re

from envgen.doctor.reports._lines import Extracted, Line, fact, version

FORMAT = "inline_pin"
_PIN = re.compile(r"(?<![\w.-])(pytorch|torch|deepspeed|colossalai|megatron[-_]core)\s*==\s*"
                  r"([0-9][\w.+]*)", re.I)
# "pip install deepspeed==0.9.2 and it fails": what was asked for, maybe never installed
_INSTALL = re.compile(r"\b(?:pip3?|conda|mamba|micromamba|uv\s+pip)\s+install\b", re.I)
_FRAMEWORKS = {"deepspeed": "deepspeed", "colossalai": "colossalai",
               "megatron-core": "megatron-core", "megatron_core": "megatron-core"}


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    for line in lines:
        if line.number in claimed or _INSTALL.search(line.text):
            continue
        for m in _PIN.finditer(line.text):
            name, value = m.group(1).lower(), version(m.group(2))
            if value is None:
                continue
            if name in ("torch", "pytorch"):
                out.append(fact(line, "torch", value, FORMAT))
                out.append(fact(line, "packages.torch", value, FORMAT))
            else:
                key = _FRAMEWORKS[name]
                out.append(fact(line, f"frameworks.{key}", value, FORMAT))
                out.append(fact(line, f"packages.{key}", value, FORMAT))
    return out
