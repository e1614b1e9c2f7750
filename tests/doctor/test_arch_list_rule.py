"""TORCH_CUDA_ARCH_LIST as pasted (envgen/doctor/reports/env_vars.py) and the rule that judges
it against how the installed DeepSpeed release's op builder reads each entry
(arch_list_unreadable; the facts are harvested from each release's op_builder/builder.py).
The H200 verification machine exported TORCH_CUDA_ARCH_LIST=9.0a, which DeepSpeed 0.19.8's JIT
builder raises on (builder.py:710, int('0a'))."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from envgen.doctor.catalog import load_catalog
from envgen.doctor.judge import judge
from envgen.doctor.reports import parse_report
from envgen.facts import load_facts

MATRIX = Path(__file__).parents[2] / "matrix"


@pytest.fixture(scope="module")
def diagnose():
    """Judge a pasted text against the shipped matrix: its DeepSpeed releases carry how their
    builder reads each entry (the fixture matrix's releases do not)."""
    facts, catalog = load_facts(MATRIX), load_catalog(MATRIX)
    return lambda text: judge(parse_report(text).snapshot, facts, catalog, origin="report")


@pytest.mark.parametrize("line, value", [
    ('export TORCH_CUDA_ARCH_LIST="8.0;9.0a"', "8.0;9.0a"),
    ("TORCH_CUDA_ARCH_LIST=9.0a DS_BUILD_OPS=1 pip install deepspeed", "9.0a"),
    ('ENV TORCH_CUDA_ARCH_LIST="7.0 7.5 8.0 8.6+PTX"', "7.0 7.5 8.0 8.6+PTX"),
    ("set TORCH_CUDA_ARCH_LIST=8.6", "8.6"),
    ('$env:TORCH_CUDA_ARCH_LIST = "8.9"', "8.9"),
    ("TORCH_CUDA_ARCH_LIST: 10.0f", "10.0f"),
])
def test_assignments_are_read(line, value) -> None:
    assert parse_report(line).snapshot.env == {"TORCH_CUDA_ARCH_LIST": value}


@pytest.mark.parametrize("line", [
    'export TORCH_CUDA_ARCH_LIST="$ARCHS"',  # a variable, not a list
    "set TORCH_CUDA_ARCH_LIST to the GPU's capability",  # prose
])
def test_non_lists_are_not_read(line) -> None:
    assert not parse_report(line).snapshot.known("env")


def test_suffix_on_0_19_8_is_an_error_with_the_plain_list(diagnose) -> None:
    d = diagnose('export TORCH_CUDA_ARCH_LIST="8.0;9.0a+PTX"\ndeepspeed 0.19.8\n')
    f = next(f for f in d.findings if f.kind == "arch_list_unreadable")
    assert f.severity == "error"
    assert f.evidence["entry"] == "9.0a+PTX" and f.evidence["where"].startswith("op_builder/")
    assert shlex.split(f.command) == ["export", "TORCH_CUDA_ARCH_LIST=8.0;9.0+PTX"]


def test_suffix_on_a_release_that_drops_it_is_a_warning(diagnose) -> None:
    d = diagnose("TORCH_CUDA_ARCH_LIST=9.0a\ndeepspeed 0.15.0\n")
    f = next(f for f in d.findings if f.kind == "arch_list_unreadable")
    assert f.severity == "warning" and "without its suffix" in f.summary


def test_ten_on_an_old_release_points_to_the_first_release_that_reads_it(diagnose) -> None:
    d = diagnose("TORCH_CUDA_ARCH_LIST=10.0 pip install deepspeed==0.10.3\n")
    f = next(f for f in d.findings if f.kind == "arch_list_unreadable")
    assert f.severity == "error" and "another architecture" in f.summary
    assert f.command is None and "and later" not in f.fix and " or later" in f.fix


def test_plain_entries_on_a_current_release_are_fine(diagnose) -> None:
    d = diagnose('export TORCH_CUDA_ARCH_LIST="8.0;9.0;10.0+PTX"\ndeepspeed 0.19.8\n')
    assert not any(f.kind == "arch_list_unreadable" for f in d.findings)
