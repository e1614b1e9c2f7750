"""GPU models named in prose: "on 8 H100s", "I configured the environment to run on RTX3090",
"GPU V100".

Input: the cleaned lines, the line numbers other parsers took (a GPU in collect_env's or
nvidia-smi's own lines is theirs), and the GPU catalogue (matrix/curated/gpus.toml: lower-case
name or alias → its record). Output: one ``gpus`` fact, the catalogue's model, when the text
names exactly one model (format "prose"; its compute capability comes from the catalogue when
judged); several models ("works on A100, fails on V100") say no one GPU, so they are explain
only (``gpu_models``). Only names with a digit are looked for ("Orin" or "Grace Hopper" are
words of prose too), spaces and hyphens optional ("RTX3090", "rtx-3090") and a plural "s"
allowed; a name of three characters or fewer ("T4", "A2", "L40") counts only on a line that
says GPU, NVIDIA, Tesla, GeForce, RTX, Quadro or card.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envgen.doctor.reports._lines import Extracted, Line, fact

FORMAT = "prose"
_CONTEXT = re.compile(r"\b(?:gpus?|nvidia|tesla|geforce|rtx|quadro|cards?)\b", re.I)
_EXAMPLE = re.compile(r"\[e\.g\.[^\]]*\]|\(e\.g\.[^)]*\)", re.I)


def _pattern(key: str) -> str:
    return r"[\s_-]?".join(re.escape(part) for part in key.split())


def _names(gpus: Mapping[str, Any]) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
    """(long names, short names) as alternations, longest first, matching whole words."""
    keys = sorted((k for k in gpus if any(c.isdigit() for c in k)), key=len, reverse=True)
    long = [_pattern(k) for k in keys if len(k) > 3]
    short = [_pattern(k) for k in keys if len(k) <= 3]

    def compiled(alts: list[str]) -> re.Pattern[str] | None:
        return re.compile(r"(?<![\w.])(" + "|".join(alts) + r")s?(?!\w)", re.I) if alts else None

    return compiled(long), compiled(short)


def _key(found: str, gpus: Mapping[str, Any]) -> str | None:
    """The catalogue key of a matched spelling ("RTX3090" → "rtx 3090")."""
    squashed = re.sub(r"[\s_-]", "", found.lower())
    for k in gpus:
        if re.sub(r"[\s_-]", "", k) == squashed:
            return k
    return None


def parse(lines: list[Line], claimed: set[int], *,
          gpus: Mapping[str, Any] | None = None) -> list[Extracted]:
    if not gpus:
        return []
    long, short = _names(gpus)
    seen: dict[str, Line] = {}  # the catalogue's model name → the first line naming it
    for line in lines:
        if not line.text or (line.number in claimed and line.number != 1):
            continue
        text = _EXAMPLE.sub("", line.text)  # a template's "(e.g. A100)" names no GPU
        for pattern in (long, short):
            if pattern is None or (pattern is short and not _CONTEXT.search(text)):
                continue
            for m in pattern.finditer(text):
                key = _key(m.group(1), gpus)
                if key is not None:
                    seen.setdefault(gpus[key].name, line)
    if len(seen) == 1:
        (name, line), = seen.items()
        return [fact(line, "gpus", ({"name": name, "compute_capability": None},), FORMAT,
                     note="the one GPU model the text names (how many: not said)")]
    return [fact(line, "gpu_models", name, FORMAT, kept=False,
                 note="explain only: the text names several GPU models")
            for name, line in seen.items()]
