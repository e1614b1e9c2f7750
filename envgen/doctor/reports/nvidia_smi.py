"""``nvidia-smi`` (its table) and ``nvidia-smi -L`` output.

Input: the cleaned lines and the line numbers other parsers took. Output: driver (from the
header) and gpus (the table's rows, or the -L list). The header's "CUDA Version" is the newest
CUDA the driver supports, not a toolkit nor torch's CUDA: it goes to explain only.
"""

from __future__ import annotations

import re

from envgen.doctor.reports._lines import Extracted, Line, fact, version

FORMAT = "nvidia_smi"
_HEADER = re.compile(r"NVIDIA-SMI\s+\S+\s+(?:Driver|KMD) Version:\s*(\S+)"
                     r"(?:\s+CUDA(?: UMD)? Version:\s*(\S+))?")
_ROW = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off|WDDM|TCC)\s*\|\s*[0-9A-Fa-f]{4,8}:")
_LIST = re.compile(r"^GPU (\d+): (.+?) \(UUID: [^)]*\)$")


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    table: list[tuple[Line, str, str]] = []  # (line, index, name)
    listed: list[tuple[Line, str, str]] = []
    for line in lines:
        if line.number in claimed:
            continue
        header = _HEADER.search(line.text)
        row = _ROW.match(line.text) or _LIST.match(line.text)
        if header:
            claimed.add(line.number)
            if version(header.group(1)):
                out.append(fact(line, "driver", version(header.group(1)), FORMAT))
            if header.group(2):
                out.append(fact(line, "driver_max_cuda", header.group(2), FORMAT, kept=False,
                                note="explain only: the newest CUDA this driver supports, "
                                "not the toolkit (nvcc) nor torch's CUDA"))
        elif row:
            claimed.add(line.number)
            found = table if line.text.startswith("|") else listed
            found.append((line, row.group(1), row.group(2).strip()))
    for found in (table, listed):
        if found:
            gpus = tuple({"name": name, "compute_capability": None}
                         for name in _first_run(found))
            out.append(fact(found[0][0], "gpus", gpus, FORMAT))
    return out


def _first_run(found: list[tuple[Line, str, str]]) -> list[str]:
    """The GPU names of the first table: a second pasted table starts again at GPU 0."""
    names, seen = [], set()
    for _, index, name in found:
        if index in seen:
            break
        seen.add(index)
        names.append(name)
    return names
