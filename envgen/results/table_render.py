"""The compatibility table's renderings and files: the Markdown page for the docs site, the
JSON for tools, the README's block between ``<!-- envgen:table:start -->`` and
``<!-- envgen:table:end -->``, and :func:`write_outputs`, which writes the three (each file
says how to regenerate it).

Input: a :class:`~envgen.results.table.Table`. The page links each record as
``evidence/<combination>/<file>.json`` (the docs site's hook, ``docs/hooks/evidence.py``,
publishes matrix/results/ there); the README block and the JSON use the records' repository
paths, relative to the README's folder.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from envgen.errors import UsageError
from envgen.results.selector_markup import selector_markup
from envgen.results.table import (
    COLUMNS,
    END,
    HEADER,
    REGENERATE,
    START,
    Evidence,
    Row,
    Table,
    relative_link,
    site_link,
)
from envgen.results.tiers import (
    KNOWN_BAD,
    LABELS,
    MEANINGS,
    TIERS,
    rank,
    tier_label,
)
from envgen.userfile import read_bytes


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _title(text: str, limit: int = 160) -> str:
    """Text for a Markdown link title: one line, no double quotes, not too long."""
    text = " ".join(text.replace('"', "'").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _record_link(e: Evidence, target: str) -> str:
    text = f"{e.tier} {e.date}" if e.status == "pass" else f"{e.tier} failed {e.date}"
    title = f"{e.machine} · envgen {e.envgen or '?'}"
    if e.error:
        title += f" · {e.error}"
    return f'[{text}]({target} "{_title(title)}")'


def _upstream_links(row: Row) -> str:
    """One link per cited URL (a citation's ``source`` may join several with " ; "), named by
    its kind; the first has the statement and the date it was read as its title. A citation
    without a URL is named, not linked."""
    links = []
    for u in row.upstream:
        kind = u.kind or "upstream"
        urls = [x.strip() for x in u.source.split(" ; ")
                if x.strip().startswith(("https://", "http://")) and " " not in x.strip()]
        title = _title(f"{u.what} (observed {u.observed or '?'})")
        links += [f'[{kind}]({url} "{title}")' if i == 0 else f"[{kind} {i + 1}]({url})"
                  for i, url in enumerate(urls)] or [kind]
    return " ".join(links)


def _tier_cell(row: Row) -> str:
    failed = [e.tier for e in row.evidence if e.status == "fail"]
    return tier_label(row.tier) + "".join(f" · {t} failed" for t in failed)


def _markdown_rows(rows: tuple[Row, ...] | list[Row], target, anchors: bool = False
                   ) -> list[str]:
    """The table; ``target(evidence)`` is the link to a record from the file rendered.
    ``anchors``: each row is addressable as ``#<combination id>`` (an image's
    io.envgen.table-row label links there)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        evidence = " ".join(_record_link(e, target(e)) for e in r.evidence)
        anchor = f'<a id="{r.combination}"></a>' if anchors else ""
        cells = (f"{anchor}{r.framework} {r.framework_version}", r.torch, r.cuda, r.python, r.os,
                 _tier_cell(r), evidence, _upstream_links(r))
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def _summary_line(table: Table) -> str:
    s = table.summary
    tiers = ", ".join(f"{s[t]} {tier_label(t)}" for t in TIERS)
    return f"{len(table.rows)} combinations: {tiers}; {s[KNOWN_BAD]} known-bad."


def legend() -> list[str]:
    """The tiers and the upstream column, as a Markdown table."""
    lines = ["| tier | proven by |", "|---|---|"]
    lines += [f"| {tier_label(t)} | {MEANINGS[t]} |" for t in TIERS]
    lines.append("| upstream | another project's CI or release notes ran this framework with "
                 "this torch and CUDA: a citation with its date, never counted as a tier |")
    return lines


def render_markdown(table: Table, page: Path) -> str:
    """The docs page. Evidence links point to ``evidence/<combination>/<file>.json`` next to
    the page, where the docs site's hook publishes matrix/results/."""
    lines = [
        "---",  # mkdocs-material: no table of contents, the selector gets the width
        "hide:",
        "  - toc",
        "---",
        f"<!-- {HEADER} -->",
        "",
        "# Compatibility",
        "",
        "Choose what you have or need; the rows update at once, and the page's address keeps "
        "the choice, so a link shares it. Each row is a combination envgen resolves, with its "
        "evidence tier and the command that makes it. The rows are every feasible "
        "combination at the newest patch of each framework and torch minor release (and "
        "every combination with records); `envgen resolve` knows the older patches too.",
        "",
        *selector_markup(),
        "",
        "## Rows with evidence",
        "",
        "How far each framework × PyTorch × CUDA × Python × OS combination is known to work, "
        "generated from the result records (`envgen results add`), the matrix facts and the "
        "upstream citations. Each row has the highest evidence tier one of its records proves:",
        "",
        *legend(),
        "",
        "A tier shown as \"T2 built · T3 failed\" also has a failed attempt: the newest failed "
        "record above the tier (or, when it is newer than every pass, at or below it). The "
        "evidence column links the record that proves the tier and the one that failed; each "
        "link's title names the machine and the envgen version. Rows at T0 are the resolver's "
        "best combination for that framework, torch and CUDA, with nothing run yet.",
        "",
        "Status, in the JSON: **known-good** is tier T3 or T4 with the newest record passing; "
        "**known-bad** is the newest record failing; **untested** is everything else (no GPU "
        "evidence yet; see the tier). The same table as JSON: "
        "[compatibility.json](compatibility.json).",
        "",
        *_markdown_rows(table.rows, site_link, anchors=True),
        "",
        _summary_line(table),
    ]
    return "\n".join(lines) + "\n"


def render_json(table: Table, root: Path) -> str:
    """The table for tools; record paths are relative to ``root`` (the project). The document
    follows envgen/schemas/compatibility-table.schema.json."""
    return json.dumps(table.to_dict(root), indent=2, ensure_ascii=False) + "\n"


def render_readme_block(table: Table, readme: Path, page: Path) -> str:
    """What goes between the README's markers, short enough for a front page: per framework,
    how many combinations each tier holds, how many failed a tier above the one they hold,
    and the best-proven one linked to its record; every row is on ``page``."""
    by_framework: dict[str, list[Row]] = {}
    for r in table.rows:
        by_framework.setdefault(r.framework, []).append(r)
    proven = {fw: rows for fw, rows in by_framework.items()
              if any(rank(r.tier) >= 1 or r.evidence for r in rows)}
    lines = [f"<!-- {HEADER} -->", ""]
    if not proven:
        lines += ["No evidence recorded yet."]
    else:
        tiers = ("T4", "T3", "T2", "T1")
        lines += ["| framework | " + " | ".join(f"{t} {LABELS[t]}" for t in tiers)
                  + " | failed a higher tier | best proven |", "|---" * (len(tiers) + 3) + "|"]
        for fw, rows in proven.items():
            counts = [str(sum(r.tier == t for r in rows)) for t in tiers]
            failed = sum(any(e.status == "fail" for e in r.evidence) for r in rows)
            # the highest tier, then the table's own order (the resolver's: newest first)
            best = min((r for r in rows if r.proof), default=None,
                       key=lambda r: -rank(r.tier))
            cell = "—" if best is None else _record_link(best.proof, relative_link(
                best.proof.path, readme.parent)).replace(
                f"[{best.proof.tier} {best.proof.date}]",
                f"[{fw} {best.framework_version} · torch {best.torch} · CUDA {best.cuda} · "
                f"Python {best.python} · {best.os}]", 1)
            lines.append("| " + " | ".join(_cell(c) for c in (fw, *counts, str(failed), cell))
                         + " |")
    rest = sum(1 for r in table.rows if rank(r.tier) == 0 and not r.evidence)
    lines += ["", f"{rest} more combination{'s' if rest != 1 else ''} (the resolver's best per "
              f"framework, torch and CUDA) only resolve{'s' if rest == 1 else ''} (T0); every "
              f"row with its records and upstream citations: the "
              f"[full table]({relative_link(page, readme.parent)})."]
    return "\n".join(lines)


MARKER_HINT = (f"add the two marker lines where the table belongs, each on a line of its own: "
               f"{START} and below it {END}; then run `{REGENERATE}` again")


def _marker(marker: str) -> re.Pattern[bytes]:
    return re.compile(rb"^[ \t]*" + re.escape(marker.encode()) + rb"[ \t]*\r?$", re.MULTILINE)


_START, _END = _marker(START), _marker(END)


def replace_block(readme: bytes, block: str, *, name: str = "README.md") -> bytes:
    """``readme`` with everything between the marker lines replaced by ``block``; every byte
    outside the markers stays as it was. A marker counts only on a line of its own, so prose
    may mention the markers."""
    starts, ends = list(_START.finditer(readme)), list(_END.finditer(readme))
    if len(starts) != 1 or len(ends) != 1:
        raise UsageError(f"{name} needs exactly one table start marker line and one end marker "
                         f"line (found {len(starts)} and {len(ends)})", hint=MARKER_HINT)
    start, end = starts[0], ends[0]
    if end.start() < start.end():
        raise UsageError(f"{name}: the table end marker comes before the start marker",
                         hint=MARKER_HINT)
    return readme[:start.end()] + b"\n" + block.encode("utf-8") + b"\n" + readme[end.start():]


@dataclass(frozen=True, slots=True)
class Written:
    """One output file of :func:`write_outputs`."""

    path: Path
    changed: bool  # False: the file already had this content


def write_outputs(table: Table, *, page: Path, data: Path, readme: Path,
                  extra: dict[Path, bytes] | None = None) -> tuple[Written, ...]:
    """Write the page, the JSON, the README block and the ``extra`` files (the selector's
    data), together. The README is checked first: without its markers nothing is written
    (UsageError)."""
    try:
        old_readme = read_bytes(readme, "config")
    except FileNotFoundError:
        raise UsageError(f"no README at {readme}",
                         hint="run from the project root, or give --readme FILE") from None
    outputs = {
        page: render_markdown(table, page).encode("utf-8"),
        data: render_json(table, readme.parent).encode("utf-8"),
        readme: replace_block(old_readme, render_readme_block(table, readme, page),
                              name=str(readme)),
        **(extra or {}),
    }
    written, changed_files = [], {}
    for path, content in outputs.items():
        try:
            changed = path.read_bytes() != content
        except FileNotFoundError:
            changed = True
        except OSError:  # a folder or an unreadable file there: write_files says why
            changed = True
        if changed:
            changed_files[path] = content
        written.append(Written(path, changed))
    from envgen.atomic import write_files

    write_files(changed_files, durable=True)  # all of them, or none
    return tuple(written)
