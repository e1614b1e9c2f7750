"""``envgen resolve``: the best combinations for a request, or why there are none."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from envgen import validate
from envgen.cli.commands import help_for
from envgen.cli.context import Context
from envgen.cli.render import stream_json, table
from envgen.errors import InfeasibleError, UsageError
from envgen.resolve.combination import Combination
from envgen.resolve.request import Request

if TYPE_CHECKING:
    from envgen.api._machine import MachineAnswer
    from envgen.resolve.explain import Explanation

EPILOG = """\
examples:
  envgen resolve --framework deepspeed --cuda 12.1
  envgen resolve --framework colossalai --python 3.11 --os ubuntu-22.04 --limit 3
  envgen resolve --framework megatron-core --gpu-arch sm_90 --driver 535.104.05
  envgen resolve --framework deepspeed --framework-version 0.10.0 --nvcc 12.1
  envgen resolve --framework deepspeed --gpu V100 --limit 3
  envgen resolve --framework deepspeed --gpu auto --driver auto
  envgen resolve --framework deepspeed --torch '>=2.4,<2.6' --json | jq '.combinations[0].id'

Versions accept an exact version (2.5.1), a prefix (2.5 = 2.5.*) or a PEP 440 specifier.
Ranking: with --prefer verified (the default), among the combinations that fit,
  1. known-good first: T4 multi-GPU, then T3 GPU (envgen's own record, the newest passing);
  2. then those upstream cites (the framework's CI or containers, NVIDIA's release notes:
     matrix/curated/upstream.toml), the ones envgen also built or locked first;
  3. then T2 built, then T1 locked (envgen built or locked exactly it; no GPU);
  4. then the rest (T0: nothing run yet);
  5. known-bad last (its newest record failed): never first while anything else fits.
Within each step: newest framework release, then newest torch, then the requested or
newest CUDA, then a mainstream Python (policy.toml), then the preferred OS.
--prefer newest: that newest-first order alone (known-bad still last). --min-tier T3:
only combinations proven at T3 or above; none → exit 3 listing the nearest to verified.
Records: the shipped matrix/results/ and your data dir (`envgen results add`). Every rule's
facts are read from the releases' own files or curated with a citation (`envgen matrix show`).
--driver auto / --gpu auto read this machine's driver and GPUs (NVML, else `nvidia-smi
--query-gpu`), print what was read ("Machine: …"; with --json the "machine" object) and
resolve for them: a GPU by its name in curated/gpus.toml, else by the compute capability
the driver gives; GPUs of several architectures are refused (name one). What cannot be read
(no driver, no GPU) is left unconstrained, as if the option were absent, with a note on
stderr.
--nvcc uses a CUDA toolkit already on the machine (a cluster's `module load cuda/12.4`, an
OS package, a base image): only torch builds whose CUDA the framework release's own nvcc
check accepts with it are offered, and `make` installs no compiler.
--json prints {"request", "policy", "combinations", "torch_builds"}: each combination has
"tier" (its evidence: tier, status, the records with date and machine, upstream citations;
apart from "facts", where the facts came from); torch_builds: every torch build the
request admits, accepted or excluded with the reason per rule. When nothing fits: exit code 3 and
an explanation (with --json: {"error": {..., "explanation": {...}}}).
Exit codes: 0 ok, 1 bad matrix data, 2 usage error, 3 no feasible combination.
"""

AXES = ("framework", "framework_version", "torch", "cuda", "python", "os", "nccl", "gpu_arch",
        "gpu", "driver", "nvcc", "flavor", "platform")


def add_request_options(parser: argparse.ArgumentParser) -> None:
    import os

    # TAB offers the matrix's values (`envgen completion`): the completers are set only when
    # argcomplete asks (its variable is set), the only time they are read
    completing = "_ARGCOMPLETE" in os.environ
    if completing:
        from envgen.cli.completers import fact_values, flavors

    g = parser.add_argument_group("request (any subset)")

    def add(flag: str, metavar: str, help: str, complete: bool = True) -> argparse.Action:
        action = g.add_argument(flag, metavar=metavar, help=help)
        if complete and completing:
            action.completer = fact_values(action.dest)
        return action

    add("--framework", "NAME", "deepspeed, megatron-core or colossalai")
    add("--framework-version", "VER", "e.g. 0.16, 0.16.4, '>=0.15'")
    add("--torch", "VER", "PyTorch version, e.g. 2.5 or 2.5.1")
    add("--cuda", "VER", "CUDA major.minor (12.1) or major (12)")
    add("--python", "VER", "Python major.minor, e.g. 3.11")
    add("--os", "ID", "OS base, e.g. ubuntu-22.04, rocky-9, debian-12")
    add("--nccl", "VER", "NCCL version torch pins, e.g. 2.21", complete=False)
    add("--gpu-arch", "ARCH", "GPU architecture: sm_90, 8.0, sm_80 …")
    add("--gpu", "NAME", "GPU model, e.g. V100, A100, H100, L40S, 'RTX 4090' "
        "(curated/gpus.toml); sets --gpu-arch. auto: this machine's GPU (NVML, else "
        "nvidia-smi); nothing read: as if not given")
    add("--nvcc", "VER", "use this system CUDA toolkit (major.minor, e.g. 12.4) instead of "
        "installing one", complete=False)
    add("--driver", "VER", "installed NVIDIA driver (nvidia-smi), e.g. 535.104.05. auto: this "
        "machine's (NVML, else nvidia-smi); nothing read: as if not given")
    add("--platform", "PLAT", "linux-x86_64 (default) or linux-aarch64", complete=False)
    flavor = add("--flavor", "KIND", "only combinations whose toolchain this lock flavor can "
                 "provide: conda (default for make), venv (pip only; CUDA 13+) or os-package "
                 "(the CUDA toolkit the OS ships: needs --os, e.g. --os debian-13)",
                 complete=False)
    if completing:
        flavor.completer = flavors


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("resolve", parents=[common], help=help_for("resolve"),
                       description="Resolve a request to ranked, complete combinations.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_request_options(p)
    p.add_argument("--limit", type=int, default=10, metavar="N",
                   help="how many combinations to list (default 10; 0 = all)")
    add_policy_options(p)
    p.set_defaults(func=run)


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    """--prefer and --min-tier: the ranking policy (envgen.results.ranking)."""
    g = parser.add_argument_group("ranking")
    g.add_argument("--prefer", choices=("verified", "newest"), default=None,
                   help="verified (default): combinations proven on GPUs first, then upstream's "
                   "evidence, then built/locked, then untested; newest: the newest release "
                   "first whatever its evidence (a known-bad one is last either way)")
    g.add_argument("--min-tier", choices=("T2", "T3", "T4"), default=None, metavar="TIER",
                   help="only combinations proven at this tier or above (T2 built, T3 GPU, "
                   "T4 multi-GPU), their newest record passing; none: exit 3")


def policy_from_args(args: argparse.Namespace, ctx: Context) -> tuple[str, str | None]:
    """(prefer, min_tier): each from its flag, else [defaults] prefer / min-tier."""
    defaults = ctx.config.get("defaults", {})
    prefer = getattr(args, "prefer", None) or defaults.get("prefer") or "verified"
    min_tier = getattr(args, "min_tier", None) or defaults.get("min-tier")
    from envgen.results.ranking import check_options

    check_options(str(prefer), None if min_tier is None else str(min_tier))
    return str(prefer), None if min_tier is None else str(min_tier)


def request_from_args(args: argparse.Namespace, ctx: Context) -> Request:
    """The request: each axis from its flag, else from [defaults] in the config file."""
    defaults = {k.replace("-", "_"): v for k, v in ctx.config.get("defaults", {}).items()}
    values = {}
    for axis in AXES:
        flag = f"--{axis.replace('_', '-')}"
        value = getattr(args, axis, None)
        source = flag
        if value is None and axis in defaults:
            value, source = defaults[axis], f"{ctx.config_path}:defaults.{axis.replace('_', '-')}"
        if value is not None:
            values[axis] = validate.text(value, flag, source).strip()
            ctx.sources[axis] = source
    return Request(**values)


def with_machine(request: Request, ctx: Context) -> tuple[Request, MachineAnswer | None]:
    """``--driver auto`` / ``--gpu auto`` answered from this machine (envgen.api.
    machine_request): the request with the values read, and what was read (None when no
    option says auto). A value not read is left out, with a note on stderr; where each value
    came from is kept for error messages."""
    if not any((getattr(request, a) or "").strip().lower() == "auto" for a in ("driver", "gpu")):
        return request, None  # the common case imports nothing more
    from envgen.api import machine_request

    with explained(ctx):
        request, answer = machine_request(request, matrix=ctx.matrix)
    assert answer is not None
    via = f"auto, read through {answer.read.source}" if answer.read.source else "auto"
    for axis in answer.asked:
        ctx.sources[axis] = f"{ctx.sources.get(axis, '--' + axis)} ({via})"
    if "gpu" in answer.asked and answer.gpu_arch:
        ctx.sources["gpu_arch"] = ctx.sources["gpu"]
    for note in answer.notes:
        ctx.progress(f"note: {note}")
    return request, answer


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.api import resolve

    request, machine = with_machine(request_from_args(args, ctx), ctx)
    if args.limit < 0:
        raise UsageError(f"--limit {args.limit} is negative", hint="use --limit N (0 = all)",
                         source="--limit")
    limit = None if args.limit == 0 else args.limit
    prefer, min_tier = policy_from_args(args, ctx)
    with explained(ctx, machine):
        found = resolve(request, limit=limit, matrix=ctx.matrix, prefer=prefer,
                        min_tier=min_tier)
    if ctx.json:
        head = {"request": found.request.given(),
                "policy": {"prefer": prefer, "min_tier": min_tier},
                "why": [d.to_dict() for d in found.why]}
        if machine is not None:
            head["machine"] = machine.to_dict()
        stream_json(head, "combinations",
                    (with_tier(c, found.standing(c)) for c in found.combinations),
                    {"torch_builds": found.torch_builds}, ctx.out, encoded=True)
        return 0
    if machine is not None:
        print(validate.shown(machine.line()), file=ctx.out)
    combos = [(c, found.standing(c)) for c in found.combinations]
    print(format_choice(found.best, request, found.why), file=ctx.out)
    print(validate.shown_lines(format_evidence(found.standing(found.best), prefer)),
          file=ctx.out)
    print(file=ctx.out)
    print(validate.shown_lines(format_table(combos)), file=ctx.out)
    return 0


def with_tier(c: Combination, standing) -> str:
    """The combination's JSON with its ``tier`` (evidence) added (ASCII: safe on a tty)."""
    import json

    return c.to_json((",", ":"))[:-1] + ',"tier":' + json.dumps(
        standing.to_dict(), separators=(",", ":")) + "}"


def format_evidence(standing, prefer: str) -> str:
    """The evidence lines under the best match: its tier and the record proving it."""
    why = {"verified": "--prefer verified: proven combinations before newer untested ones",
           "newest": "--prefer newest: the newest release whatever its evidence"}[prefer]
    return f"  evidence   {standing.line()}\n  ranked by  {why}"


@contextlib.contextmanager
def explained(ctx: Context, machine: MachineAnswer | None = None) -> Iterator[None]:
    """When nothing fits, attach the explanation (text on stderr; with --json the error
    object carries it); a usage error names where its value really came from ([defaults],
    --gpu auto). With ``machine`` (--driver/--gpu auto), both say what was read."""
    try:
        yield
    except InfeasibleError as exc:
        text = getattr(exc.explanation, "text", None)
        exc.report = text() if callable(text) else format_explanation(exc.explanation)
        if machine is not None:
            exc.report = f"{machine.line()}\n{exc.report}"
            exc.extra = {**(exc.extra or {}), "machine": machine.to_dict()}
        raise
    except UsageError as exc:
        if exc.source and exc.source.startswith("--"):
            exc.source = ctx.sources.get(exc.source[2:].replace("-", "_"), exc.source)
        if machine is not None:
            exc.report = machine.line()
            exc.extra = {**(exc.extra or {}), "machine": machine.to_dict()}
        raise


def format_table(found: list) -> str:
    """(combination, standing) pairs as rows, the evidence tier first."""
    return table(
        ("#", "tier", "framework", "torch", "cuda", "python", "os", "nccl", "gcc", "id"),
        ((i, _tier_cell(s), f"{c.framework} {c.framework_version}",
          c.torch_pin.split("==")[1], c.cuda, c.python, c.os, c.nccl,
          f"{c.gcc} ({c.gcc_source})", c.id)
         for i, (c, s) in enumerate(found, 1)),
    )


def _tier_cell(s) -> str:
    """``T3 good``, ``T1``, ``T0 upstream``, ``T2 bad``."""
    extra = {"known-good": " good", "known-bad": " bad"}.get(s.status, "")
    return s.tier + (extra or (" upstream" if s.upstream else ""))


def format_choice(c: Combination, request: Request, why) -> str:
    """The best combination, a line per axis saying what decided it (from the resolver's
    decisions: the option that pinned it, or the ranking rule that picked it), then the
    driver floor, unavailable ops and notes."""
    asked = request.flags() or "(no constraints)"
    lines = [f"Best match for {asked}:"]
    for d in why:
        lines.append(f"  {d.axis:<10} {d.value:<22} {d.reason}")
    lines += [f"  op unavailable: {o}" for o in c.ops_unavailable]
    lines += [f"  note: {n}" for n in c.notes]
    lines.append(f"  id: {c.id}")
    return "\n".join(lines)


def format_explanation(e: Explanation) -> str:
    lines = [f"No combination satisfies: {e.request.flags() or '(no constraints)'}"]
    for msg in e.empty:
        lines.append(f"  - {msg}")
    if e.removed:
        lines.append("Candidates removed, by constraint:")
        for r in e.removed:
            lines.append(f"  {r.constraint:<17} {r.count:>7,}  {r.meaning}")
            lines.append(f"  {'':<17} {'':>7}  e.g. {r.example}")
    if e.nearest:
        lines.append("Nearest feasible:")
        for a in e.nearest:
            change = ", ".join(f"{k.replace('_', '-')} {v[0]} → {v[1]}"
                               for k, v in a.changes.items()) or "(as asked)"
            drop = " ".join(f"--{x.replace('_', '-')}" for x in a.relaxed)
            lines.append(f"  without {drop}: {change}")
            lines.append(f"      {a.combination.id}")
    else:
        lines.append("Nothing close is feasible; check `envgen matrix show` for what exists.")
    return "\n".join(lines)
