"""Colossal-AI's ``colossalai check -i`` output (colossalai/cli/check/check_installation.py).

Input: the cleaned lines and the line numbers other parsers took. Output: the facts stated.
Since 0.2: "Colossal-AI version" (without its +torch…cu… tag), "PyTorch version" (torch
without its local tag), "System CUDA version" (``$CUDA_HOME/bin/nvcc -V``, major.minor:
nvcc) and "CUDA version required by PyTorch" (torch.version.cuda: torch_cuda; "N/A": none,
but that may also mean torch failed, so it states nothing). Before 0.2 the report was
"CUDA Version" (the same nvcc), "PyTorch Version", "CUDA Version in PyTorch Build".
"""

from __future__ import annotations

import re

from envgen.doctor.reports._lines import Extracted, Line, fact, near, version

FORMAT = "colossalai_check"
_ANCHOR = re.compile(r"^(?:#### Installation Report ####|Colossal-AI version:|CUDA Version in "
                     r"PyTorch Build:|PyTorch CUDA Version Match:|Found AOT CUDA Extension:)", re.I)
_FIELD = re.compile(r"^(Colossal-AI version|PyTorch version|PyTorch Version|System CUDA version|"
                    r"CUDA version required by PyTorch|CUDA Version|CUDA Version in PyTorch "
                    r"Build)\s*[:：]\s*(.*)$", re.I)
_FACT = {"Colossal-AI version": "frameworks.colossalai", "PyTorch version": "torch",
         "PyTorch Version": "torch", "System CUDA version": "nvcc", "CUDA Version": "nvcc",
         "CUDA version required by PyTorch": "torch_cuda",
         "CUDA Version in PyTorch Build": "torch_cuda"}
_FACT_LOWER = {label.lower(): name for label, name in _FACT.items()}


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    for i, line in enumerate(lines):
        m = _FIELD.match(line.text)
        if line.number in claimed or line.bullet or not m or not near(lines, i, _ANCHOR, 8, 8):
            continue
        claimed.add(line.number)
        label, value = m.group(1), version(m.group(2))
        if value is None:
            continue
        name = _FACT_LOWER[label.lower()]
        note = "the nvcc of torch's CUDA_HOME, major.minor" if name == "nvcc" else ""
        out.append(fact(line, name, value, FORMAT, note=note))
        if name == "frameworks.colossalai":
            out.append(fact(line, "packages.colossalai", value, FORMAT))
    if out and not any(e.fact == "frameworks.colossalai" for e in out):
        first = next(line for line in lines if line.number == min(e.line for e in out))
        out.append(fact(first, "frameworks.colossalai", None, FORMAT,
                        note="`colossalai check -i` is Colossal-AI's own report: it is "
                        "installed; the text does not say which version"))
    return out
