"""Every command the docs show with its output was run to produce that output.

Three ways a page may show a command's output (docs/*.md):
- ``<!-- envgen:run envgen … -->``: generated at build (docs/hooks/run_commands.py);
- a fenced block starting ``$ envgen …`` with no marker: re-run here, the output must match;
- a block whose command needs what a test machine has not (a cluster, a broken image, a GPU),
  preceded by ``<!-- recorded: <date>, <where> -->``: shown as recorded, said so in the page.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted((REPO / "docs").glob("*.md"))
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_RECORDED = re.compile(r"<!-- recorded: (\d{4}-\d{2}-\d{2}), \S.* -->\s*$")


def _hook():
    spec = importlib.util.spec_from_file_location("run_commands",
                                                  REPO / "docs" / "hooks" / "run_commands.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def output_blocks(pages=PAGES) -> list[tuple[str, str, str, str | None]]:
    """(page, command, the output shown, the recorded marker or None) per block that starts
    with ``$ envgen`` (or ``$ VAR=… envgen``)."""
    out = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for m in _FENCE.finditer(text):
            body = m.group(1)
            first, _, rest = body.partition("\n")
            if not re.match(r"^\$ (\w+=\S+ )*envgen\b", first):
                continue
            before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = _RECORDED.match(before)
            out.append((page.name, first[2:], rest.rstrip("\n"),
                        marker.group(0) if marker else None))
    return out


def stale_blocks(pages=PAGES) -> list[str]:
    """The pasted outputs (no recorded marker) that are not what their command prints now."""
    hook, stale = _hook(), []
    for page, command, shown, marker in output_blocks(pages):
        if marker is not None:
            continue
        if not re.match(r"^envgen\b", command):
            stale.append(f"{page}: `{command}` sets variables: mark it <!-- recorded: DATE, "
                         "WHERE --> or drop them")
            continue
        printed = hook.run(command, REPO).split("\n", 2)[2].rsplit("\n```", 1)[0]
        if printed.rstrip("\n") != shown:
            stale.append(f"{page}: `{command}` prints something else now: paste the new "
                         f"output or use <!-- envgen:run {command} -->")
    return stale


BLOCKS = output_blocks()


def test_the_pages_show_commands_with_output():
    assert BLOCKS or any("<!-- envgen:run" in p.read_text(encoding="utf-8") for p in PAGES)


def test_every_pasted_output_is_what_the_command_prints():
    assert stale_blocks() == []


def test_a_stale_pasted_output_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```console\n$ envgen resolve --cuda 99.9\nall fine\n```\n\n"
                    "<!-- recorded: 2026-11-24, a cluster -->\n"
                    "```console\n$ envgen preflight --hosts n[0-2]\nwhatever\n```\n")
    stale = stale_blocks([page])
    assert len(stale) == 1 and "envgen resolve --cuda 99.9" in stale[0]


def test_recorded_blocks_say_when_and_where():
    for page, command, _, marker in BLOCKS:
        if marker is not None:
            assert _RECORDED.match(marker), (page, command)


def test_the_hook_runs_only_envgen_and_shows_the_real_output():
    hook = _hook()
    with pytest.raises(hook.CommandError):
        hook.run("rm -rf /tmp/x", REPO)
    block = hook.run("envgen --version", REPO)
    version = subprocess.run([sys.executable, "-m", "envgen", "--version"], capture_output=True,
                             text=True, check=True, env={**os.environ, "COLUMNS": "100"}).stdout
    assert block == f"```console\n$ envgen --version\n{version.strip()}\n```"
    failed = hook.run("envgen resolve --cuda 99.9", REPO)
    assert failed.endswith("(exit code 3)\n```") and "99.9" in failed  # 3: nothing fits


def test_every_run_directive_names_an_envgen_command():
    hook = _hook()
    for page in PAGES:
        for m in hook.DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
            assert m.group("command").startswith("envgen "), (page.name, m.group(0))
