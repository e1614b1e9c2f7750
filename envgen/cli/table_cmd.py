"""``envgen table``: the compatibility table from result records + facts."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from envgen.cli.context import Context

EPILOG = """\
examples:
  envgen table                      # the rows as a table that fits the terminal
  envgen table --framework deepspeed --cuda 12 --gpu H100
  envgen table --markdown           # the docs page's Markdown on stdout
  envgen table --json | jq '.rows[] | select(.tier >= "T3") | .combination'
  envgen table --json | jq '.rows[] | select(.status == "known-bad") | .evidence.records'
  envgen table --write              # docs/compatibility.md, docs/compatibility.json,
                                    # docs/selector.json, README.md

Rows, in the ranking policy's order (`envgen resolve --help`: known-good first, then upstream's
evidence, built, locked, untested; known-bad last), per framework: every combination with
result records, plus the resolver's best combination for each
framework × torch major.minor × CUDA of each framework's latest release. Each row has the
highest evidence tier one of its records proves: T0 resolves (nothing run), T1 locked (an
attempt record: the lock solves), T2 built (an attempt record: image built, ops compiled for
the target archs and imported; or a verify run without GPU), T3 GPU (a verify run: ops checked
on a GPU), T4 multi-GPU (a verify run on >= 2 GPUs with the NCCL smoke test); and the newest
failed attempt above it. Upstream citations (<matrix dir>/curated/upstream.toml) are shown
next to the tier, never counted as one. Status: known-good (tier >= T3, newest record passed),
known-bad (newest record failed), untested (no GPU evidence yet; see the tier).
The page links records as evidence/<combination>/<file>.json, where the docs site's hook
(docs/hooks/evidence.py) publishes matrix/results/; the JSON and the README use repository
paths. --write replaces only the README's lines between <!-- envgen:table:start --> and
<!-- envgen:table:end -->; a README without the markers writes nothing. Paths are relative to
the working directory. docs/selector.json is the page's selector data: every feasible
combination at the newest patch per framework and torch minor, plus every combination with
records, with the resolver's reasons for the filter pairs no row has. The four files are
written together or not at all (a full disk or an interrupt changes none).
Exit codes: 0 ok, 1 bad data (a stored record, the matrix), 2 usage (e.g. README markers),
4 filesystem, or another table --write writing there (nothing written).
"""

def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("table", parents=[common], help="generate the compatibility table",
                       description="Generate the compatibility table (Markdown page, JSON, "
                       "README block) from the result records and the matrix facts.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--write", action="store_true",
                   help="write the page, the JSON and the README block instead of printing")
    p.add_argument("--markdown", action="store_true",
                   help="print the docs page's Markdown instead of the terminal table")
    g = p.add_argument_group("filters (as the docs page's selector; not with --write)")
    g.add_argument("--framework", metavar="NAME", help="deepspeed, megatron-core or colossalai")
    g.add_argument("--cuda", metavar="VER", help="CUDA major.minor (12.1) or major (12)")
    g.add_argument("--gpu", metavar="NAME",
                   help="a GPU name (H100, 'RTX 4090') or architecture (sm_90): the rows whose "
                   "torch build and nvcc can target it")
    p.add_argument("--results-dir", metavar="DIR",
                   help="where records are stored (default: <matrix dir>/results)")
    p.add_argument("--page", metavar="FILE", default="docs/compatibility.md",
                   help="the Markdown page (default docs/compatibility.md)")
    p.add_argument("--data-file", metavar="FILE", default="docs/compatibility.json",
                   help="the JSON for tools (default docs/compatibility.json)")
    p.add_argument("--selector-file", metavar="FILE", default="docs/selector.json",
                   help="the selector's data for the docs page: every feasible combination, "
                   "newest patch per minor (default docs/selector.json; written with --write)")
    p.add_argument("--readme", metavar="FILE", default="README.md",
                   help="the README holding the table markers (default README.md); JSON "
                   "evidence paths are relative to its folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen import validate
    from envgen.api import TableRequest, table
    from envgen.results.tiers import TIERS

    page, data, selector, readme = (
        _shown(validate.path(v, f"--{n}", f"--{n}")) for n, v in
        (("page", args.page), ("data-file", args.data_file),
         ("selector-file", args.selector_file), ("readme", args.readme)))
    dirs = ([validate.path(args.results_dir, "--results-dir", "--results-dir")]
            if args.results_dir else None)
    req = TableRequest(write=args.write, page=page, data_file=data, readme=readme,
                       selector_file=selector,
                       results_dirs=tuple(dirs) if dirs else None)
    chosen = {k: validate.text(v, f"--{k}", f"--{k}").strip()
              for k in ("framework", "cuda", "gpu") if (v := getattr(args, k, None))}
    if args.write and (chosen or args.markdown):
        from envgen.errors import UsageError

        raise UsageError("--write writes the whole table; filters and --markdown only print",
                         hint="drop --framework/--cuda/--gpu/--markdown, or drop --write",
                         source="--write")
    result = table(req, matrix=ctx.matrix, progress=ctx.progress)
    if not args.write:
        if args.markdown and not chosen:
            ctx.out.write(result.markdown())
            return 0
        from envgen.results.table import Table
        from envgen.results.table_render import render_json
        from envgen.results.table_view import select

        rows = select(result.table, ctx.matrix.facts, **chosen)
        if ctx.json:
            ctx.out.write(render_json(Table(rows), req.readme.parent))
        elif args.markdown:
            from envgen.results.table_render import render_markdown

            ctx.out.write(render_markdown(Table(rows), req.page))
        else:
            print(terminal_table(rows, _width(ctx), _colour(ctx)), file=ctx.out)
        return 0
    s = result.table.summary
    if ctx.json:
        from envgen.cli.render import dump_json

        dump_json({"written": [str(w.path) for w in result.written if w.changed],
                   "unchanged": [str(w.path) for w in result.written if not w.changed],
                   "summary": s}, ctx.out)
        return 0
    for w in result.written:
        print(f"{'wrote' if w.changed else 'unchanged':<9} {w.path}", file=ctx.out)
    tiers = ", ".join(f"{s[t]} {t}" for t in TIERS)
    ctx.progress(f"{len(result.table.rows)} rows: {tiers}; {s['known-bad']} known-bad")
    return 0


_COLOURS = {"known-good": "32", "known-bad": "31"}  # green, red; others plain


def _width(ctx: Context) -> int:
    import shutil

    return max(60, shutil.get_terminal_size((120, 24)).columns)


def _colour(ctx: Context) -> bool:
    """Colour only on a terminal that allows it (NO_COLOR unset, TERM not dumb)."""
    isatty = getattr(ctx.out, "isatty", None)
    return bool(isatty and isatty()) and "NO_COLOR" not in os.environ \
        and os.environ.get("TERM") != "dumb"


def terminal_table(rows, width: int, colour: bool = False) -> str:
    """The rows as a plain table that fits ``width`` columns: tier first, the evidence (the
    record proving the tier: date and machine) last, cut with … when the line is too long.
    Every value escaped for the terminal."""
    from envgen import validate

    if not rows:
        return "No row fits this choice (envgen resolve with the same options says why)."
    head = ("tier", "status", "framework", "torch", "cuda", "python", "os", "evidence")
    cells = []
    for r in rows:
        proof = r.proof
        ev = f"{proof.date} {proof.machine}" if proof else "no evidence yet"
        if r.upstream:
            ev += f" · upstream: {r.upstream[0].kind}"
        cells.append([validate.shown(str(v)) for v in (
            r.tier, r.status, f"{r.framework} {r.framework_version}", r.torch, r.cuda,
            r.python, r.os, ev)])
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    fixed = sum(widths[:-1]) + 2 * (len(head) - 1)
    widths[-1] = max(10, min(widths[-1], width - fixed))

    def cut(text: str, w: int) -> str:
        return text if len(text) <= w else text[: w - 1] + "…"

    def line(values, status: str | None = None) -> str:
        out = [cut(v, w).ljust(w) for v, w in zip(values, widths, strict=True)]
        if colour and status in _COLOURS:
            out[0] = f"\x1b[{_COLOURS[status]}m{out[0]}\x1b[0m"
        return "  ".join(out).rstrip()

    lines = [line(head), line(["-" * w for w in widths])]
    lines += [line(c, r.status) for c, r in zip(cells, rows, strict=True)]
    lines.append(f"{len(rows)} row{'s' if len(rows) != 1 else ''}; the full page: "
                 "envgen table --markdown, or docs/compatibility.md")
    return "\n".join(lines)


def _shown(path: Path) -> Path:
    """A path as the user would type it: relative to the working directory when inside it."""
    rel = os.path.relpath(path)
    return Path(rel) if not rel.startswith("..") else path
