"""The CLI reference page (docs ``cli.md``), written from the real argparse parser.

In: the parser ``envgen.cli.main.build_parser()`` builds (every command set up in full), or any
parser given. Out: one Markdown string: for the program and every subcommand, depth first in
the order they were registered, a ``## envgen <cmd> [<sub>]`` heading (unique, so its anchor,
e.g. ``#envgen-matrix-show``, is stable), the description (else the one-line help), the usage,
a table of the options (flags and metavar, default, help) and the epilog verbatim. Text is
formatted at a fixed width, never the terminal's, so the page is the same wherever it is built.
Options and subcommands whose help is ``argparse.SUPPRESS`` are left out; options a command
shares with ``envgen`` itself (the common ones: same action objects, via ``parents=``) are
listed once under ``envgen`` and named in one line elsewhere.

Hand-written: argparse has no Markdown writer; mkdocs-click is for click only, and the
argparse-to-Markdown packages (argmark, argparse-help-markdown, mkdocs-argparse 0.0.1) are
young single-maintainer tools with flat tables, not worth a docs dependency for this page.
docs/hooks/cli_reference.py adds the page to the site at build time.
"""

from __future__ import annotations

import argparse
import html
import re
import sys

WIDTH = 100  # usage wrapped here whatever $COLUMNS says (as docs/hooks/run_commands.py)
# defaults that depend on the machine building the docs, shown as what they mean
_MACHINE_DEFAULTS = {sys.executable: "the Python running envgen"}
_CODE = re.compile(r"(`[^`\n]+`)")
# escaped outside code spans: what Markdown would read as markup (``_`` only at a word's edge)
_MD_SPECIAL = re.compile(r"([\\*\[\]|]|(?<!\w)_|_(?!\w))")


def markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """The reference page for ``parser`` (default: envgen's own, built with every command)."""
    if parser is None:
        from envgen.cli.main import build_parser

        parser = build_parser()
    common = [a for a in parser._actions if _shown(a) and a.option_strings
              and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]
    blocks = [
        "# CLI reference",
        f"Generated from `{parser.prog}`'s argparse parser when the docs are built "
        "(regenerate: `nox -s docs`); do not edit. Every command also takes `-h` / `--help`.",
    ]
    for path, command, help_text in _commands(parser, [parser.prog], None):
        blocks += _section(path, command, help_text, common if command is not parser else [])
    return "\n\n".join(blocks) + "\n"


def _commands(parser, path, help_text):
    """(names, parser, one-line help) for ``parser`` and its subcommands, depth first."""
    yield path, parser, help_text
    for name, sub, sub_help in _subcommands(parser):
        yield from _commands(sub, [*path, name], sub_help)


def _subcommands(parser):
    """(name, parser, one-line help) of each subcommand, in registration order; aliases and
    subcommands with suppressed help left out."""
    seen = set()
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help for choice in action._choices_actions}
        for name, sub in action.choices.items():
            if id(sub) not in seen and helps.get(name) != argparse.SUPPRESS:
                seen.add(id(sub))
                yield name, sub, helps.get(name)


def _section(path, parser, help_text, common) -> list[str]:
    """The Markdown blocks of one command."""
    blocks = [f"## {' '.join(path)}"]
    text = _expand(parser.description or help_text or "", parser.prog)
    blocks += [_md(" ".join(paragraph.split()))
               for paragraph in re.split(r"\n\s*\n", text) if paragraph.strip()]
    blocks.append(_fenced(_usage(parser)))
    subs = list(_subcommands(parser))
    if subs:
        blocks.append("Subcommands:\n\n" + "\n".join(
            f"- [`{name}`](#{_anchor([*path, name])})" + (f": {_md(h)}" if h else "")
            for name, _, h in subs))
    shared = [a for a in common if any(a is b for b in parser._actions)]
    formatter = _formatter(parser)
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if _shown(a) and a not in shared
                   and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
        if actions:
            blocks.append(f"**{_md(group.title or 'options')}**\n\n" + _table(formatter, actions))
    if shared:
        flags = ", ".join("/".join(map(_code, a.option_strings)) for a in shared)
        blocks.append(f"Also the [common options](#{_anchor(path[:1])}): {flags}.")
    if parser.epilog:
        blocks.append(_fenced(_expand(parser.epilog, parser.prog)))
    return blocks


def _anchor(path: list[str]) -> str:
    """The id MkDocs (Python-Markdown's toc) gives the heading of ``path``."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", " ".join(path)).strip().lower())


def _shown(action: argparse.Action) -> bool:
    return action.help != argparse.SUPPRESS


def _formatter(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    formatter = parser.formatter_class(prog=parser.prog, width=WIDTH)
    if hasattr(formatter, "_set_color"):  # Python 3.14+: never ANSI colours in the page
        formatter._set_color(False)
    return formatter


def _usage(parser: argparse.ArgumentParser) -> str:
    """``parser.format_usage()`` at WIDTH columns."""
    formatter = _formatter(parser)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help()


def _table(formatter: argparse.HelpFormatter, actions: list[argparse.Action]) -> str:
    """A Markdown table of ``actions``: argument, default (a column only if one has one),
    help."""
    rows = [(_invocation(formatter, a), _default(a.default),
             _md(" ".join(formatter._expand_help(a).split())) if a.help else "")
            for a in actions]
    header = "Option" if any(a.option_strings for a in actions) else "Argument"
    if any(default for _, default, _ in rows):
        lines = [f"| {header} | Default | Description |", "| --- | --- | --- |"]
        lines += [f"| {flags} | {default} | {text} |" for flags, default, text in rows]
    else:
        lines = [f"| {header} | Description |", "| --- | --- |"]
        lines += [f"| {flags} | {text} |" for flags, _, text in rows]
    return "\n".join(lines)


def _invocation(formatter: argparse.HelpFormatter, action: argparse.Action) -> str:
    """``-q``, ``--quiet`` / ``--limit N`` / ``{ops,smoke,all}``, as code."""
    if not action.option_strings:
        return _code(formatter._format_args(action, action.dest))
    *first, last = action.option_strings
    if action.nargs != 0:
        last += " " + formatter._format_args(action, action.dest.upper())
    return ", ".join([*map(_code, first), _code(last)])


def _default(default) -> str:
    """The default as shown: nothing for None, SUPPRESS, False or an empty list."""
    if default is None or default is False or default == argparse.SUPPRESS:
        return ""
    if isinstance(default, (list, tuple)):
        return ", ".join(_code(str(d)) for d in default)
    if isinstance(default, str) and default in _MACHINE_DEFAULTS:
        return _md(_MACHINE_DEFAULTS[default])
    return _code(str(default))


def _expand(text: str, prog: str) -> str:
    """argparse's own ``%(prog)s`` substitution in descriptions and epilogs."""
    return text % {"prog": prog} if "%(prog)" in text else text


def _md(text: str) -> str:
    """Plain text as Markdown that is safe in a table cell: code spans kept, the rest escaped."""
    return "".join(_code(part[1:-1]) if i % 2 else _escape(part)
                   for i, part in enumerate(_CODE.split(text)))


def _escape(text: str) -> str:
    text = _MD_SPECIAL.sub(lambda m: "\\" + m.group(), text)
    return text.replace("<", "&lt;").replace(">", "&gt;")  # `<data dir>` is no HTML tag


def _code(text: str) -> str:
    """A code span; as HTML where it holds a ``|`` (a table cell would split on it) or a
    backtick."""
    if "|" in text or "`" in text:
        return "<code>" + html.escape(text).replace("|", "&#124;") + "</code>"
    return f"`{text}`"


def _fenced(text: str) -> str:
    """``text`` verbatim in a ```text block (a longer fence where it holds backticks)."""
    text = text.strip("\n").rstrip()
    fence = "`" * max([3, *(len(run) + 1 for run in re.findall(r"`+", text))])
    return f"{fence}text\n{text}\n{fence}"
