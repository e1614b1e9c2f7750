"""``envgen doctor``: judge one environment (live, a saved snapshot or a pasted report) and
print the findings, worst first, each with its fix."""

from __future__ import annotations

import argparse
import textwrap

from envgen import validate
from envgen.cli.commands import help_for
from envgen.cli.context import Context
from envgen.cli.render import dump_json

EPILOG = """\
examples:
  envgen doctor                                   # the active environment (venv / conda / python3)
  envgen doctor --python /opt/env/bin/python --op async_io --op fused_adam
  envgen doctor --save env.json                   # keep what was collected (to judge elsewhere)
  envgen doctor --snapshot env.json --json        # judge a saved (or hand-written) snapshot
  python -m torch.utils.collect_env | envgen doctor --report - --framework deepspeed
  envgen doctor --report issue.txt --explain      # show which line gave which fact

Live, it runs a small collector with the target interpreter (no torch import in envgen
itself): OS, glibc, Python, torch (version, CUDA, C++11 ABI, NCCL, arch list), the nvcc
extension builds use (CUDA_HOME, then PATH) and the one on PATH, the host gcc and other gcc-N,
the driver and GPUs (NVML, else nvidia-smi), libaio, ninja, the frameworks and every package
(pip check too), the NCCL LD_LIBRARY_PATH / LD_PRELOAD would load, the relevant environment
variables, and each cached torch extension (tried against the current torch).
Each finding names its kind, the facts it used, the fix and, where one exists, the command
that applies it, the rule's citation and the fix pattern. A fact a rule needs and the input
lacks is listed under "needs" with how to get it: the doctor does not guess.
--json prints {"schema": 1, "findings": [...], "needs": [...], "snapshot": {...}}.

exit codes: 0 no error finding, 1 at least one error finding, 2 usage error (an unreadable
file, bad JSON, an unknown snapshot schema, nothing recognised in a report), 4 the
interpreter could not be run.
"""

_MARK = {"error": "✗", "warning": "!", "info": "·"}


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("doctor", parents=[common], help=help_for("doctor"),
                       description="Diagnose one environment and print what to fix.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_argument_group("what to judge (default: the live environment)")
    one = src.add_mutually_exclusive_group()
    one.add_argument("--python", metavar="PY",
                     help="the interpreter of the environment (default: $VIRTUAL_ENV, "
                     "$CONDA_PREFIX, python3 on PATH)")
    one.add_argument("--snapshot", metavar="FILE", help="a snapshot saved with --save (JSON)")
    one.add_argument("--report", metavar="FILE",
                     help="a pasted report: collect_env, ds_report, colossalai check -i, pip "
                     "list, conda list, nvidia-smi, nvcc/gcc --version, an issue's "
                     "Environment section ('-' reads standard input)")
    p.add_argument("--framework", metavar="NAME", action="append", default=[],
                   help="judge for this framework too (deepspeed, megatron-core, colossalai); "
                   "installed ones always are; repeatable")
    p.add_argument("--op", metavar="NAME", action="append", default=[],
                   help="an op you build or use (fused_adam, cpu_adam, async_io, "
                   "transformer_inference …); repeatable")
    p.add_argument("--save", metavar="FILE", help="write the snapshot (JSON, schema 1) here")
    p.add_argument("--explain", action="store_true",
                   help="with --report: show which line gave which fact")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.api import DoctorRequest, doctor

    text = None
    if args.report == "-":
        from envgen.userfile import read_stdin

        text = read_stdin("report").decode("utf-8", "replace")
    req = DoctorRequest(
        python=args.python,
        snapshot=validate.path(args.snapshot, "--snapshot", "--snapshot") if args.snapshot
        else None,
        report=args.report, report_text=text,
        frameworks=tuple(validate.text(f, "--framework", "--framework").strip()
                         for f in args.framework),
        ops=tuple(validate.text(o, "--op", "--op").strip() for o in args.op),
        save=validate.path(args.save, "--save", "--save") if args.save else None)
    result = doctor(req, matrix=ctx.matrix, progress=ctx.progress)
    if ctx.json:
        dump_json(result.to_dict(), ctx.out)
    else:
        print(render(result, explain=args.explain), file=ctx.out)
    return 0 if result.diagnosis.ok else 1


def _facts_line(result) -> str:
    s = result.diagnosis.snapshot.to_dict()
    parts = []
    for name, version in (s.get("frameworks") or {}).items():
        parts.append(f"{name} {version or '(version unknown)'}")
    if "torch" in s:
        cuda = s.get("torch_cuda")
        parts.append(f"torch {s['torch']}" + (f" (CUDA {cuda})" if cuda else
                                               " (CPU)" if "torch_cuda" in s else "")
                     if s["torch"] else "no torch")
    for key, label in (("nvcc", "nvcc"), ("gcc", "gcc"), ("python", "Python")):
        if s.get(key):
            parts.append(f"{label} {s[key]}")
    gpus = s.get("gpus")
    if gpus is not None:
        parts.append(f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"
                     + (f" ({gpus[0]['name']})" if gpus else ""))
    if s.get("driver"):
        parts.append(f"driver {s['driver']}")
    return " · ".join(parts) or "nothing known"


def render(result, *, explain: bool = False) -> str:
    """The screen: every value from the environment, a snapshot or a report with its control
    characters escaped (validate.shown); the commands were quoted where they were built."""
    shown = validate.shown
    d = result.diagnosis
    out = [shown(f"envgen doctor — {d.origin}"), f"  {shown(_facts_line(result))}"]
    if explain and result.explain:
        out += ["", "read from the report:"] + [f"  {shown(line)}" for line in result.explain]
    counts = {s: sum(1 for f in d.findings if f.severity == s)
              for s in ("error", "warning", "info")}
    summary = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n)
    out += ["", shown(d.verdict(summary))]
    wrap = textwrap.TextWrapper(width=100, subsequent_indent=" " * 11, break_long_words=False,
                                break_on_hyphens=False)
    for f in d.findings:
        out += ["", f"{_MARK[f.severity]} {f.severity:<8} {f.kind}"]
        if f.explains:
            line = shown(f.explains)
            out.append(wrap.fill(f"  {'explains':<8} \"{line}\""))
        out += [wrap.fill(f"  {'what':<8} {shown(f.summary)}"),
                wrap.fill(f"  {'fix':<8} {shown(f.fix)}")]
        if f.command:
            out.append(f"  {'run':<8} {shown(f.command)}")
            if f.tier:
                out.append(wrap.fill(f"  {'tier':<8} {shown(f.tier['summary'])}"))
        if f.source:
            out.append(wrap.fill(f"  {'rule':<8} {shown(f.source)}"))
        if f.pattern:
            name = d.patterns.get(f.pattern, f.pattern)
            out.append(wrap.fill(f"  {'pattern':<8} {shown(name)}"))
    if d.coverage:
        out += ["", "coverage (outside envgen's data — not judged, not found fine):"]
        for c in d.coverage:
            out.append(wrap.fill(shown(f"  ~ {c.note}")))
    if d.needs:
        out += ["", "needs (facts a rule needs that the input lacks — run these and judge "
                    "again):"]
        for n in d.needs:
            out.append(wrap.fill(shown(f"  ? {n.fact}: {n.why}. Get it: {n.how}")))
    if result.saved:
        out += ["", shown(f"snapshot saved to {result.saved}")]
    return "\n".join(out)
