"""``envgen matrix show``: the facts, filterable, as tables or JSON."""

from __future__ import annotations

import argparse

from envgen.cli.commands import help_for
from envgen.cli.context import Context
from envgen.cli.render import dump_json, table
from envgen.errors import UsageError
from envgen.facts.model import Facts, to_jsonable
from envgen.facts.provenance import fact_counts, framework_marks, toolkit_marks, torch_marks
from envgen.resolve.request import cuda_matches, matcher, suggest
from envgen.versions import dotted_key, parse_version

KINDS = ("summary", "torch", "frameworks", "build", "cuda", "os", "gpus", "rules")

EPILOG = """\
examples:
  envgen matrix show                                   # counts and provenance
  envgen matrix show --kind torch --cuda 12.4 --python 3.11
  envgen matrix show --kind frameworks --framework deepspeed
  envgen matrix show --kind build --framework deepspeed   # read from each release's files
  envgen matrix show --kind frameworks --framework deepspeed --json | jq '.frameworks[0].build'
  envgen matrix show --kind cuda --json | jq '.cuda_toolkits[] | {cuda, max_gcc}'
  envgen matrix show --json                            # everything, for tools
"""


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("show", parents=[common], help=help_for("show", "matrix"),
                       description="Show the compatibility facts with their sources.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kind", choices=KINDS, default=None,
                   help="which facts (default: summary; with --json: all)")
    p.add_argument("--torch", metavar="VER", help="only these torch versions")
    p.add_argument("--cuda", metavar="VER", help="only this CUDA (12.1) or major (12)")
    p.add_argument("--python", metavar="VER", help="only builds with a wheel for this Python")
    p.add_argument("--platform", metavar="PLAT", help="linux-x86_64 or linux-aarch64")
    p.add_argument("--framework", metavar="NAME", help="only this framework's releases")
    p.set_defaults(func=run)


def _filtered(facts: Facts, args: argparse.Namespace) -> dict[str, list]:
    names = list(facts.framework_names)
    if args.framework is not None and args.framework not in names:
        raise UsageError(f"unknown framework {args.framework!r}",
                         hint=f"{suggest(args.framework, names)}known: {', '.join(names)}")
    torch_ok = matcher("--torch", args.torch)
    cuda = args.cuda.removeprefix("cu") if args.cuda else None
    builds = [
        b for b in facts.torch_builds
        if (torch_ok is None or torch_ok(b.version))
        and (cuda is None or (b.cuda is not None and cuda_matches(cuda, b.cuda)))
        and (args.python is None or args.python in b.python)
        and (args.platform is None or b.platform.endswith(args.platform))
    ]
    builds.sort(key=lambda b: (parse_version(b.version), dotted_key(b.cuda or "0"), b.platform),
                reverse=True)
    releases = [r for r in facts.frameworks
                if args.framework is None or r.framework == args.framework]
    releases.sort(key=lambda r: (r.framework, parse_version(r.version)), reverse=True)
    toolkits = [t for k, t in sorted(facts.toolkits.items(), key=lambda kv: dotted_key(kv[0]))
                if cuda is None or cuda_matches(cuda, k)]
    gpus = sorted({g.name: g for g in facts.gpus.values()}.values(), key=lambda g: g.name)
    rules = {"constraints": list(facts.constraints), "breakages": list(facts.breakages),
             "compilers": list(facts.compilers)}
    return {"torch_builds": builds, "frameworks": releases, "cuda_toolkits": toolkits,
            "os": list(facts.oses.values()), "gpus": gpus, "rules": rules,
            "os_toolkits": [facts.os_toolkits[k] for k in sorted(facts.os_toolkits)]}


_MARKS = {"torch_builds": torch_marks, "frameworks": framework_marks,
          "cuda_toolkits": toolkit_marks}


def _jsonable(key: str, items) -> object:
    """Records as JSON, each with ``provenance``: which of its facts are harvested, curated
    or unknown (a torch build's ``pins_unknown`` as pin → why)."""
    marks = _MARKS.get(key)
    if marks is None:
        return to_jsonable(items)
    out = [{**to_jsonable(item), "provenance": marks(item)} for item in items]
    if key == "torch_builds":
        for row, b in zip(out, items, strict=True):
            row["pins_unknown"] = dict(b.pins_unknown)
    return out


def run(args: argparse.Namespace, ctx: Context) -> int:
    facts = ctx.matrix.facts
    data = _filtered(facts, args)
    kind = args.kind or ("all" if ctx.json else "summary")
    if ctx.json:
        keys = {"torch": ["torch_builds"], "frameworks": ["frameworks"],
                "build": ["frameworks"], "cuda": ["cuda_toolkits"], "os": ["os", "os_toolkits"],
                "gpus": ["gpus"], "rules": ["rules"]}.get(kind, list(data))
        out = {k: _jsonable(k, data[k]) for k in keys}
        if kind in ("all", "summary"):
            out["generated"] = facts.generated
            out["fact_counts"] = fact_counts(facts)
        dump_json(out, ctx.out)
        return 0
    text = _render(kind, data, facts)
    if kind == "summary":
        from envgen.cli.options import shown
        from envgen.facts.locate import harvested_dir

        where = shown(harvested_dir(ctx.matrix_dir, ctx.data_dir).resolve())
        text = text.replace("\n", f"\n  read from        {where}/\n", 1)
    print(text, file=ctx.out)
    return 0


def _unknown_archs(builds) -> str:
    """The CUDA builds shown whose GPU arch list is unknown, each with why (a GPU request
    against one is answered "unknown", never "fits")."""
    unknown = [b for b in builds if b.cuda and b.archs is None]
    lines = [f"\n\n{len(unknown)} CUDA build(s) with an unknown GPU arch list"
             + (":" if unknown else "")]
    lines += [f"  {b.pin.split('==')[1]} {b.platform}: "
              f"{b.archs_unknown or 'no source in the matrix states it'}" for b in unknown]
    return "\n".join(lines)


def _pin(b, key: str) -> str | None:
    """A pin's cell: the pin; "none" where the build requires no such wheel, "bundled" where
    it carries the library itself, "?" where it is not known (the reasons follow the table)."""
    value = getattr(b, key)
    if value is not None:
        return value
    why = dict(b.pins_unknown).get(key)
    if why is None:
        return None
    return why.split(":", 1)[0] if why.startswith(("none:", "bundled:")) else "?"


def _unknown_pins(builds) -> str:
    """The pins left out of builds not harvested, each with why, the builds that share a
    reason on one line."""
    reasons: dict[tuple[str, str], list[str]] = {}
    for b in builds:
        for key, why in b.pins_unknown:
            reasons.setdefault((key, why), []).append(
                f"{b.pin.split('==')[1]}{'' if b.platform == 'linux-x86_64' else ' (aarch64)'}")
    if not reasons:
        return ""
    lines = [f"\n\nPins of PyTorch-index builds left out ({sum(map(len, reasons.values()))}), "
             "why:"]
    lines += [f"  {key} of {', '.join(pins)}: {why}" for (key, why), pins in reasons.items()]
    return "\n".join(lines)


def _render(kind: str, data: dict[str, list], facts: Facts) -> str:
    if kind == "torch":
        return table(("torch", "cuda", "platform", "python", "glibc", "nccl", "cudnn", "triton",
                      "c++", "archs", "index", "pins"),
                     ((b.pin.split("==")[1], b.cuda or "cpu", b.platform, " ".join(b.python),
                       b.glibc, _pin(b, "nccl"), _pin(b, "cudnn"), _pin(b, "triton"),
                       b.headers.cxx_std if b.headers else "?",
                       f"{b.archs[0]}…{b.archs[-1]}" if b.archs else "?",
                       b.index + (" (curated)" if b.curated else ""),
                       b.pins_from if b.cuda else "-")
                      for b in data["torch_builds"])) + _unknown_archs(data["torch_builds"]) \
            + _unknown_pins(data["torch_builds"])
    if kind == "frameworks":
        return table(("framework", "version", "requires torch", "requires python", "from"),
                     ((r.framework, r.version, r.requires_torch if r.requires_torch else
                       ("any" if r.requires_torch == "" else "-"), r.requires_python,
                       r.metadata_from) for r in data["frameworks"]))
    if kind == "build":
        return _render_build(data["frameworks"])
    if kind == "cuda":
        return table(("cuda", "nvcc", "max gcc", "max clang", "min driver", "releases",
                      "archs"),
                     ((t.cuda, f"{t.nvcc_package} {t.nvcc_version}", t.max_gcc, t.max_clang,
                       t.min_driver, " ".join(f"{r.release}:{r.driver or '?'}"
                                              for r in t.releases) or "-",
                       f"{t.archs[0]} … {t.archs[-1]} ({len(t.archs)})" if t.archs else "-")
                      for t in data["cuda_toolkits"]))
    if kind == "gpus":
        return table(("gpu", "arch", "aliases", "source"),
                     ((g.name, g.arch, ", ".join(g.aliases), g.source) for g in data["gpus"]))
    if kind == "rules":
        rules = data["rules"]
        return "\n".join([
            table(("framework", "versions", "torch", "cuda", "python", "source"),
                  ((c.framework, c.versions or "all", c.requires_torch, c.requires_cuda,
                    c.requires_python, c.source) for c in rules["constraints"])),
            "",
            table(("framework", "versions", "torch", "cuda", "python", "checked", "what"),
                  ((b.framework, b.versions, b.torch or "any", b.cuda or "any",
                    b.python or "any", b.checked_through, b.what)
                   for b in rules["breakages"])),
            "",
            table(("c++", "min gcc", "min clang", "source"),
                  ((c.std, c.min_gcc, c.min_clang, c.source) for c in rules["compilers"])),
        ])
    if kind == "os":
        ostk = {t.os: t for t in data["os_toolkits"]}
        return table(("os", "glibc", "gcc", "gcc available", "archs", "eol",
                      "CUDA toolkit package (--flavor os-package)"),
                     ((o.id, o.glibc, o.gcc, " ".join(map(str, o.gcc_available)),
                       " ".join(o.archs), o.eol,
                       f"{ostk[o.id].package} {ostk[o.id].version} (CUDA {ostk[o.id].cuda}, "
                       f"g++-{ostk[o.id].gcc}, {'/'.join(ostk[o.id].components)})"
                       if o.id in ostk else "-") for o in data["os"]))
    counts = {}
    for r in facts.frameworks:
        counts[r.framework] = counts.get(r.framework, 0) + 1
    cuda_builds = [b for b in facts.torch_builds if b.cuda]
    gen = facts.generated or {}
    lines = [
        f"matrix: harvested {gen.get('date', '?')} by `{gen.get('command', '?')}`",
        f"  torch builds     {len(facts.torch_builds)} ({len(cuda_builds)} CUDA, "
        f"{sum(b.curated for b in facts.torch_builds)} from curated variants), versions "
        f"{_span(b.version for b in facts.torch_builds)}",
        "  frameworks       " + ", ".join(f"{k} {v} releases" for k, v in counts.items()),
        f"  CUDA toolkits    {len(facts.toolkits)} ({_span(facts.toolkits, dotted_key)})",
        f"  OS CUDA packages {len(facts.os_toolkits)} ("
        + (", ".join(f"{t.os} {t.cuda}" for t in sorted(facts.os_toolkits.values(),
                                                       key=lambda t: t.os)) or "none")
        + "; --flavor os-package)",
        f"  OS bases         {len(facts.oses)} ({', '.join(facts.oses)})",
        f"  curated rules    {len(facts.constraints)} framework constraints, "
        f"{len(facts.breakages)} known breakages, {len(facts.compilers)} C++ standards, "
        f"{len({g.name for g in facts.gpus.values()})} GPUs",
        "  facts            harvested / curated / unknown, per kind:",
    ]
    for key, c in fact_counts(facts).items():
        if not key.startswith("curated."):
            lines.append(f"    {key:<28} {c.get('harvested', 0):>4} / {c.get('curated', 0):>4} "
                         f"/ {c.get('unknown', 0):>4}")
    lines.append("use --kind torch|frameworks|build|cuda|os|gpus|rules for the records, "
                 "--json for everything")
    return "\n".join(lines)


def _render_build(releases) -> str:
    """What each framework release's own build files state (harvested)."""
    rows = []
    for r in releases:
        b = r.build
        if b is None or not b.read:
            rows.append((r.framework, r.version, "not read", b.error if b else "-", "", "", ""))
            continue
        ok = "; ".join(f"{k}: {v[0]}…{v[-1]}" for k, v in sorted((b.mismatch_ok or {}).items())
                       if v)
        std = ",".join(sorted({x.std for x in (*b.cxx_std, *b.nvcc_std)}))
        floors = " ".join(f"{o.name}≥{o.min_cc}" for o in b.ops if o.min_cc)
        rows.append((r.framework, r.version, b.nvcc_check or "?", ok or "-", b.skip_cuda_check
                     or "-", f"c++{std}" if std else "?", floors or "-"))
    return table(("framework", "version", "nvcc check", "minor mismatch ok", "skip var", "std",
                  "op cc floors"), rows)


def _span(values, key=parse_version) -> str:
    vals = sorted(set(values), key=key)
    return f"{vals[0]} … {vals[-1]}" if vals else "none"
