"""``envgen whatif``: what a change would mean for an existing lock, before installing."""

from __future__ import annotations

import argparse

from envgen import validate
from envgen.cli.commands import help_for
from envgen.cli.context import Context
from envgen.cli.options import add_source_options, cache_dir, one_ca_cert
from envgen.cli.render import dump_json

EPILOG = """\
examples:
  envgen whatif --lock locks/deepspeed-0.19.8-torch2.15.0-cu132-py3.12-ubuntu22.04-x86_64 \\
      --torch 2.14
  envgen whatif --lock DIR --framework-version 0.18.9
  envgen whatif --lock DIR --cuda 12.8 --python 3.11 --json
  envgen whatif --lock DIR --gpu A100 --no-lock         # the combination only, no solve
  envgen whatif --lock DIR --gpu auto --driver auto      # would it run on this machine?

What it answers, nothing installed: the new best combination with the lock's other axes kept
(a torch without a build for the lock's CUDA lets the CUDA go; a framework release that does
not accept the lock's torch lets torch go; a driver too old for the lock's CUDA lets the CUDA,
then torch, go; each said), or why none fits (the constraints that removed the candidates, the
nearest feasible requests); the decisions whose value or deciding rule changes (the
framework's torch range, nvcc and gcc, NCCL, the driver floor, ...); the lock diff from a real
solve of the new target with the lock's flavor (packages added, removed, changed); the evidence
tier of both combinations (a tier lost is said); the `envgen make` command for the new one.
--gpu auto / --driver auto: this machine's GPU and driver, read as `envgen resolve --help` says
(the "Machine: …" line; --json: "machine").

exit codes: 0 the change fits, 3 nothing fits (the explanation on stderr), 1 a lock or data
error, 2 usage error (a lock file edited after envgen wrote it), 4 environment (an index
unreachable for the solve; --no-lock skips it).
"""


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("whatif", parents=[common], help=help_for("whatif"),
                       description="What changes if an existing lock moves to another torch, "
                       "framework release, CUDA, Python, OS or GPU — answered before "
                       "anything is installed.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lock", metavar="DIR", required=True, help="a directory `envgen make` wrote")
    g = p.add_argument_group("the change (one or more)")
    g.add_argument("--torch", metavar="VERSION", help="another torch, e.g. 2.6 or 2.6.0")
    g.add_argument("--framework-version", metavar="VERSION",
                   help="another release of the lock's framework")
    g.add_argument("--cuda", metavar="X.Y", help="another CUDA, e.g. 12.8")
    g.add_argument("--python", metavar="X.Y", help="another Python, e.g. 3.12")
    g.add_argument("--os", metavar="NAME", help="another OS base, e.g. ubuntu-24.04")
    gpu = g.add_argument("--gpu", metavar="NAME", help="another GPU, e.g. H100 (its arch must "
                         "run torch's kernels and the ops); auto: this machine's GPU (NVML, "
                         "else nvidia-smi)")
    g.add_argument("--gpu-arch", metavar="ARCH", help="another GPU architecture, e.g. sm_90")
    driver = g.add_argument("--driver", metavar="VER",
                            help="another NVIDIA driver, e.g. 535.104.05 (the lock's CUDA, "
                            "then torch, may have to go); auto: this machine's")
    import os

    if "_ARGCOMPLETE" in os.environ:  # TAB offers auto and the GPU names (envgen completion)
        from envgen.cli.completers import fact_values

        gpu.completer, driver.completer = fact_values("gpu"), fact_values("driver")
    p.add_argument("--no-lock", action="store_true",
                   help="skip the solve: no package diff (no index needed)")
    add_source_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.api import LockOptions, WhatIfRequest, whatif
    from envgen.cli.resolve_cmd import format_explanation

    changes = {k: validate.text(getattr(args, k), f"--{k.replace('_', '-')}",
                                f"--{k.replace('_', '-')}").strip()
               for k in ("torch", "framework_version", "cuda", "python", "os", "gpu",
                         "gpu_arch", "driver")
               if getattr(args, k) is not None}
    changes, machine = machine_changes(changes, ctx)
    channels = ctx.setting(args, "channels")
    options = LockOptions(
        flavor="venv",  # replaced by the lock's own flavor
        channels=tuple(channels) if channels else None,
        channel_alias=ctx.setting(args, "channel-alias"),
        index_url=ctx.setting(args, "index-url"),
        extra_index_urls=tuple(ctx.setting(args, "extra-index-url") or ()),
        torch_index_url=ctx.setting(args, "torch-index-url"),
        offline=bool(args.offline), cache_dir=cache_dir(ctx, args), ca_cert=one_ca_cert(ctx, args))
    req = WhatIfRequest(lock_dir=validate.path(args.lock, "--lock", "--lock"), changes=changes,
                        lock=options, solve=not args.no_lock)
    result = whatif(req, matrix=ctx.matrix, progress=ctx.progress)
    doc = result.to_dict()
    if machine is not None:
        doc["machine"] = machine.to_dict()
    if result.infeasible is not None:
        report = format_explanation(result.infeasible.explanation)
        if machine is not None:
            report = f"{machine.line()}\n{report}"
        if ctx.json:  # one JSON document: the answer, its "why_not" the error object
            print(report, file=ctx.err)
            dump_json(doc, ctx.out)
            return result.infeasible.exit_code
        result.infeasible.report = report
        raise result.infeasible
    if ctx.json:
        dump_json(doc, ctx.out)
        return 0
    if machine is not None:
        print(validate.shown(machine.line()), file=ctx.out)
    print(render(result), file=ctx.out)
    return 0


def machine_changes(changes: dict[str, str], ctx: Context):
    """--driver auto / --gpu auto answered from this machine (as for resolve): the changes
    with the values read (a GPU by its curated name, else --gpu-arch), and what was read;
    an auto that read nothing is dropped, with a note. UsageError when nothing is left."""
    from envgen.cli.resolve_cmd import with_machine
    from envgen.errors import UsageError
    from envgen.resolve.request import Request

    auto = {k: v for k, v in changes.items() if k in ("driver", "gpu")}
    if not any(v.lower() == "auto" for v in auto.values()):
        return changes, None
    asked = Request(gpu_arch=changes.get("gpu_arch"), **auto)
    answered, machine = with_machine(asked, ctx)
    out = {k: v for k, v in changes.items() if k not in ("driver", "gpu", "gpu_arch")}
    out.update({k: v for k in ("gpu", "gpu_arch", "driver")
                if (v := getattr(answered, k)) is not None})
    if not out:
        raise UsageError("--driver/--gpu auto read nothing on this machine, so no change is "
                         "left to answer", hint=" ".join(machine.notes) if machine else None,
                         source="--gpu auto" if "gpu" in auto else "--driver auto")
    return out, machine


def render(r) -> str:
    asked = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in r.changes.items())
    lines = [f"What if {r.old.id} moves to {asked}:",
             f"  new best: {r.new.id}"]
    if r.released:
        lines.append(f"  (the lock's {', '.join(r.released)} could not stay: re-chosen)")
    if r.decisions:
        lines.append("  what decides it, before → after:")
        for c in r.decisions:
            lines.append(f"    {c.axis:<10} {c.old or '-'} → {c.new or '-'}")
            if c.new_reason and c.new_reason != c.old_reason:
                lines.append(f"    {'':<10} now: {c.new_reason}")
            if c.old_reason and c.old_reason != c.new_reason:
                lines.append(f"    {'':<10} was: {c.old_reason}")
    for name, diff in (("pip", r.pip), ("conda", r.conda)):
        if diff is None:
            continue
        lines.append(f"  {name} packages: {len(diff.changed)} changed, {len(diff.added)} added, "
                     f"{len(diff.removed)} removed, {diff.unchanged} unchanged")
        lines += [f"    ~ {n} {o} → {v}" for n, o, v in diff.changed]
        lines += [f"    + {n} {v}" for n, v in diff.added]
        lines += [f"    - {n} {v}" for n, v in diff.removed]
    if r.pip is None and r.conda is None:
        lines.append("  packages: not solved (--no-lock)")
    lost = " — tier lost: re-run the evidence for it" if r.tier_lost else ""
    lines.append(f"  evidence: {r.old_tier} → {r.new_tier}{lost}")
    if r.old_standing is not None:
        lines.append(f"    now:   {r.old_standing.line()}")
    if r.new_standing is not None:
        lines.append(f"    after: {r.new_standing.line()}")
    lines.append(f"  make it: {r.make_command}")
    return validate.shown_lines("\n".join(lines))  # no control character reaches the terminal
