"""The CLI reference page (envgen.cli.reference, published by docs/hooks/cli_reference.py) is
written from the real parser: every command, every shown option, nothing suppressed, the same
text wherever and however often it is built."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest

from envgen.cli.main import build_parser
from envgen.cli.reference import markdown

HOOK = Path(__file__).resolve().parents[2] / "docs" / "hooks" / "cli_reference.py"


@pytest.fixture(scope="module")
def page() -> str:
    return markdown()


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("envgen",)):
    """(path, parser) of ``parser`` and every subcommand, found independently of the module."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _section(page: str, heading: str) -> str:
    start = page.index(f"\n## {heading}\n")
    end = page.find("\n## ", start + 1)
    return page[start:end if end >= 0 else None]


def _mentions(text: str, flag: str) -> bool:
    """``flag`` appears as code (alone, or followed by its metavar)."""
    return re.search(rf"(`|<code>){re.escape(flag)}[ `<]", text) is not None


def test_every_command_has_one_heading(page):
    headings = [line[3:] for line in page.splitlines() if line.startswith("## ")]
    want = [" ".join(path) for path, _ in _commands(build_parser())]
    assert headings == want  # all of them, registration order, depth first
    assert len(set(headings)) == len(headings)  # unique, so their anchors are stable
    assert page.startswith("# CLI reference\n")
    assert "`nox -s docs`" in page.split("\n## ", 1)[0]
    for sub in ("envgen matrix show", "envgen matrix update", "envgen results add"):
        assert sub in headings


@pytest.mark.parametrize("command", ["resolve", "preflight", "matrix show", "verify"])
def test_every_option_of_a_command_appears_in_its_section(page, command):
    root = build_parser()
    parser = dict(_commands(root))[("envgen", *command.split())]
    section = _section(page, f"envgen {command}")
    shown = [a for a in parser._actions if a.help != argparse.SUPPRESS
             and not isinstance(a, argparse._HelpAction)]
    assert shown
    for action in shown:
        for flag in action.option_strings:
            assert _mentions(section, flag), (command, flag)
        common = any(action is a for a in root._actions)  # named in one line, no help there
        if action.option_strings and action.help and not common:
            flag = action.option_strings[0]
            row = next(line for line in section.splitlines()
                       if line.startswith("| ") and _mentions(line.split(" | ")[0] + " ", flag))
            assert re.findall(r"\w+", action.help)[0] in row.split(" | ")[-1], (command, row)
    assert "```text\nusage: envgen " + command in section
    assert parser.epilog.strip().splitlines()[0] in section  # the epilog, verbatim


def test_subcommands_link_to_their_headings(page):
    matrix = _section(page, "envgen matrix")
    for name in ("show", "update", "github"):
        assert f"- [`{name}`](#envgen-matrix-{name})" in matrix


def test_deterministic_and_independent_of_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    narrow = markdown()
    monkeypatch.setenv("COLUMNS", "300")
    wide = markdown()
    monkeypatch.delenv("COLUMNS")
    assert narrow == wide == markdown()
    assert sys.executable not in narrow  # `verify --python`'s default is this interpreter


def _toy() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toy", description="A toy.")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run it")
    run.add_argument("--mode", default="a|b", help="fast | slow (`x|y` as code)")
    run.add_argument("--secret", help=argparse.SUPPRESS)
    run.add_argument("--level", type=int, default=3, help="how much, %(default)s by default")
    sub.add_parser("hidden", help=argparse.SUPPRESS)
    return parser


def test_a_pipe_in_help_or_default_does_not_break_the_row():
    text = markdown(_toy())
    row = next(line for line in text.splitlines() if line.startswith("| `--mode"))
    header = next(line for line in text.splitlines() if line.startswith("| Option |"))
    cells = re.findall(r"(?<!\\)\|", row)
    assert len(cells) == len(re.findall(r"\|", header))
    assert "fast \\| slow" in row
    assert "how much, 3 by default" in text  # help expanded as argparse does

    md = pytest.importorskip("markdown")
    html = md.markdown(text, extensions=["tables"])
    assert "<td>fast | slow (<code>x&#124;y</code> as code)</td>" in html
    assert "<td><code>a&#124;b</code></td>" in html


def test_suppressed_options_and_commands_are_left_out(page):
    text = markdown(_toy())
    assert "--secret" not in text
    assert "## toy hidden" not in text and "(#toy-hidden)" not in text
    assert "## toy run" in text
    # the real one: `envgen matrix update --backoff` is hidden from --help
    assert "--backoff" not in page


def test_common_options_are_listed_once_and_named_elsewhere(page):
    root = _section(page, "envgen")
    assert "| `--matrix-dir DIR` |" in root
    resolve = _section(page, "envgen resolve")
    assert "| `--matrix-dir" not in resolve
    assert "Also the [common options](#envgen): `--json`, `-q`/`--quiet`" in resolve


def test_the_hook_adds_the_generated_page(tmp_path):
    """As mkdocs runs it: registered under ``hooks:``, called through the plugin collection."""
    pytest.importorskip("mkdocs")
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files

    (tmp_path / "docs").mkdir()
    config = MkDocsConfig(config_file_path=str(tmp_path / "mkdocs.yml"))
    config.load_dict({"site_name": "t", "docs_dir": str(tmp_path / "docs"),
                      "site_dir": str(tmp_path / "site"), "hooks": [str(HOOK)]})
    errors, _ = config.validate()
    assert not errors
    files = config.plugins.on_files(Files([]), config=config)
    page = files.get_file_from_path("cli.md")
    assert page is not None and page.generated_by is not None
    assert page.content_string == markdown()
