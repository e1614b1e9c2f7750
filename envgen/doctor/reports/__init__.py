"""Pasted bug reports → a doctor snapshot (``envgen doctor --report FILE|-``).

Input: the text people paste into an issue: ``python -m torch.utils.collect_env``,
``ds_report``, ``colossalai check -i``, ``pip list`` / ``pip freeze`` / ``conda list``,
``nvidia-smi`` / ``nvidia-smi -L``, ``nvcc --version``, ``gcc --version``, the frameworks' issue
template answers and error messages that state facts, in any mix, inside code fences,
``<details>`` blocks, quotes or bullets. Output: :func:`parse_report` → :class:`Report`, whose
snapshot holds only what the text states (nothing guessed) and whose explain lists every fact
found with its format and line. Where two sections disagree, the most specific source wins
(collect_env > ds_report > colossalai check > nvidia-smi / nvcc / gcc > error messages >
package lists > template answers > pins inline in prose; for nvcc, CUDA_HOME's (ds_report,
colossalai check, the CUDA mismatch errors) before PATH's) and the other value stays in
explain, marked as a conflict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from envgen.doctor.reports import (
    collect_env,
    colossalai_check,
    ds_report,
    env_vars,
    errors,
    gpu_names,
    inline,
    nvidia_smi,
    outputs,
    packages,
    prose,
    requirements,
    template,
    toolchain,
)
from envgen.doctor.reports._lines import Extracted, Line, split
from envgen.doctor.snapshot import Snapshot

if TYPE_CHECKING:
    from envgen.doctor.images import NgcImage

__all__ = ["LOOKED_FOR", "Extracted", "Report", "describe", "parse_report"]

# What the parsers read, for the message when a text states none of it (exit 2).
LOOKED_FOR = ("collect_env, ds_report, `colossalai check -i`, pip/conda lists, pip show, "
              "nvidia-smi, nvcc/gcc/ldd/python --version, issue-template answers, versions and "
              "GPU models in prose or the title (\"torch 2.1.0\", \"python3.8\", "
              "\"torch1.8cu10.1\", \"8x A100\"), install commands, site-packages and "
              "torch_extensions paths, error lines that state versions, "
              "pip's and transformers' requirement conflicts")

# In this order each parser takes its lines; a later one skips the lines taken.
_PARSERS: tuple[Callable[[list[Line], set[int]], list[Extracted]], ...] = (
    collect_env.parse, ds_report.parse, colossalai_check.parse, nvidia_smi.parse,
    toolchain.parse, outputs.parse, errors.parse, requirements.parse, env_vars.parse,
    packages.parse, template.parse, inline.parse, prose.parse)
_RANK = {"collect_env": 0, "ds_report": 1, "colossalai_check": 2, "nvidia_smi": 3,
         "nvcc_version": 3, "gcc_version": 3, "command_output": 3, "error": 4, "env_var": 4,
         "pip_freeze": 5, "pip_list": 5, "pip_show": 5, "conda_list": 5, "issue_template": 6,
         "inline_pin": 7, "title": 8, "prose": 8, "path": 8, "ngc_image": 8, "windows_sign": 8,
         "macos_sign": 8,
         "install_command": 9, "env_name": 10}
_NVCC_RANK = {"ds_report": 0, "colossalai_check": 1, "error": 2, "collect_env": 3,
              "nvcc_version": 3}
_DICTS = ("packages", "frameworks", "import_errors", "requires_python", "errors", "env")
# facts the rules decide by: two values of one, each from a list or a tool's output, are said
# (Report.disputed), never silently resolved; prose, titles, paths, names and install
# commands are weaker sources, outranked without a word
_DISPUTABLE = ("torch", "torch_cuda", "nvcc", "driver", "python", "gcc", "glibc")
_WEAK = {"title", "prose", "path", "ngc_image", "windows_sign", "macos_sign", "install_command",
         "env_name", "inline_pin"}
# versions kept for explain only that still make a report recognisable (not exit 2)
_EXPLAIN_VERSIONS = {"cuda", "nccl", "image", "driver_max_cuda", "gpu_models"}


@dataclass(frozen=True)
class Report:
    """What a pasted report states: the snapshot, every fact found (``explain``, in line
    order, the unused ones with ``kept`` False and a note) and the formats recognised."""

    snapshot: Snapshot
    explain: tuple[Extracted, ...]
    formats: tuple[str, ...]

    @property
    def recognised(self) -> bool:
        """Whether the text stated anything recognisable: a snapshot fact, or a value kept
        for explain only (a bare "CUDA 10.1", an NGC image whose versions are unknown)."""
        return any(e.kept or e.fact in _EXPLAIN_VERSIONS for e in self.explain)

    @property
    def disputed(self) -> dict[str, tuple[str, ...]]:
        """The facts stated twice, differently, by lists or tools' output: fact → "value
        (format, line N)" of the kept value, then of each other."""
        out: dict[str, tuple[str, ...]] = {}
        for name in _DISPUTABLE:
            kept = next((e for e in self.explain if e.fact == name and e.kept), None)
            if kept is None or kept.format in _WEAK:
                continue
            others = [e for e in self.explain if e.fact == name and not e.kept
                      and e.format not in _WEAK and not _agree(kept, e)
                      # collect_env's nvcc is PATH's (path_nvcc), ds_report's CUDA_HOME's: two
                      # toolkits, which cuda_home_mismatch judges, not one fact stated twice
                      and not (name == "nvcc" and "collect_env" in (kept.format, e.format))]
            if others:
                out[name] = tuple(f"{_show(e.value)} ({e.format}, line {e.line})"
                                  for e in (kept, *others))
        return out


def parse_report(text: str, *, images: Mapping[str, NgcImage] | None = None,
                 gpus: Mapping[str, Any] | None = None) -> Report:
    """The :class:`Report` of ``text`` (a pasted report, any mix of formats); ``images``, the NGC
    table (:func:`envgen.doctor.images.load_images`), gives an NGC image's versions; ``gpus``,
    the GPU catalogue (``Facts.gpus``: lower-case name or alias → record), the GPU models that
    prose can name."""
    lines = split(text)
    claimed: set[int] = set()
    found: list[Extracted] = []
    for parse in _PARSERS:
        found.extend(prose.parse(lines, claimed, images=images) if parse is prose.parse
                     else parse(lines, claimed))
    found.extend(gpu_names.parse(lines, claimed, gpus=gpus))
    explain = _choose(found)
    doc = _document([e for e in explain if e.kept])
    formats = tuple(dict.fromkeys(e.format for e in explain))
    return Report(Snapshot.from_dict(doc, source="the report"), explain, formats)


def _rank(e: Extracted) -> tuple[int, int]:
    table = _NVCC_RANK if e.fact == "nvcc" else _RANK
    return table.get(e.format, 9), e.line


def _choose(found: list[Extracted]) -> tuple[Extracted, ...]:
    """Every fact once: the best-ranked value kept, or a more precise one that agrees with it
    ("12.1.105" over "12.1", "2.1.0+cu121" over "2.1.0"); the others noted."""
    by_fact: dict[str, list[Extracted]] = {}
    for e in found:
        by_fact.setdefault(e.fact, []).append(e)
    out: list[Extracted] = []
    for candidates in by_fact.values():
        kept_ones = sorted((e for e in candidates if e.kept), key=_rank)
        out.extend(e for e in candidates if not e.kept)
        if not kept_ones:
            continue
        best = kept_ones[0]
        for e in kept_ones[1:]:
            if _agree(best, e) and _precision(e.value) > _precision(best.value):
                best = e
        for e in kept_ones:
            if e is best:
                out.append(e)
            elif _agree(best, e):
                out.append(replace(e, kept=False, note=_join(e.note, "agrees with line "
                                                                     f"{best.line}")))
            else:
                out.append(replace(e, kept=False, note=_join(
                    e.note, f"conflict: line {best.line} ({best.format}) says "
                    f"{_show(best.value)}, which is kept")))
    return tuple(sorted(out, key=lambda e: (e.line, e.fact)))


def _agree(first: Extracted, second: Extracted) -> bool:
    """Whether two values of one fact agree: equal, one a more precise form of the other, or
    a package version unknown (null: a source checkout) beside a known one."""
    a, b = first.value, second.value
    if a == b:
        return True
    if first.fact.startswith(("packages.", "frameworks.")) and None in (a, b):
        return True
    if not (isinstance(a, str) and isinstance(b, str)):
        return False
    short, long = sorted((a, b), key=len)
    return long.startswith((short + ".", short + "+"))


def _precision(value: Any) -> int:
    return len(value) if isinstance(value, str) else 0


def _join(first: str, second: str) -> str:
    return f"{first}; {second}" if first else second


def _document(kept: list[Extracted]) -> dict[str, Any]:
    """The snapshot JSON object of the kept facts."""
    doc: dict[str, Any] = {"schema": 1}
    for e in kept:
        head, _, key = e.fact.partition(".")
        if head in _DICTS and key:
            doc.setdefault(head, {})[key] = e.value
        elif head == "libaio" and key:
            doc.setdefault("libaio", {"library": None, "headers": None})[key] = e.value
        elif head == "gpus":
            doc["gpus"] = [dict(g) for g in e.value]
        elif head == "conflicts":
            doc.setdefault("conflicts", []).append(dict(e.value))
        else:
            doc[e.fact] = e.value
    return doc


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple) and not all(isinstance(v, dict) for v in value):
        return " ".join(map(str, value))  # torch_arch_list
    if isinstance(value, tuple):
        names = [g["name"] for g in value]
        return ", ".join(f"{names.count(n)} × {n}" for n in dict.fromkeys(names))
    return str(value)


def describe(report: Report) -> list[str]:
    """Lines for ``--explain``: each fact with its format, line and source text, then the
    values not used and why."""
    def where(e: Extracted) -> str:
        text = e.text if len(e.text) <= 90 else e.text[:87] + "..."
        return f"({e.format}, line {e.line}: {text!r})"

    kept = [f"{e.fact} = {_show(e.value)}   {where(e)}" for e in report.explain if e.kept]
    unused = [f"  not used: {e.fact} = {_show(e.value)}   {where(e)}: {e.note}"
              for e in report.explain if not e.kept]
    return kept + unused
