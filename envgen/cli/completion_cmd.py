"""``envgen completion SHELL``: the shell's completion script for envgen (argcomplete's).

The script asks envgen itself on each TAB (``_ARGCOMPLETE`` set: ``envgen.cli.entrypoint``
builds the full parser and lets argcomplete answer), so commands, options and their choices
are always those of the installed version.
"""

from __future__ import annotations

import argparse

from envgen.cli.commands import help_for
from envgen.cli.context import Context

SHELLS = ("bash", "zsh", "fish")

EPILOG = """\
install it (once; new shells pick it up):
  bash   echo 'eval "$(envgen completion bash)"' >> ~/.bashrc
  zsh    echo 'eval "$(envgen completion zsh)"' >> ~/.zshrc      # after compinit
  fish   envgen completion fish > ~/.config/fish/completions/envgen.fish

then: envgen res<TAB> → envgen resolve; envgen resolve --fr<TAB> → --framework;
envgen resolve --framework <TAB> → deepspeed megatron-core colossalai.

exit codes: 0 printed, 2 usage error (an unknown shell).
"""


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("completion", parents=[common], help=help_for("completion"),
                       description="Print the shell completion script for envgen (bash, zsh "
                       "or fish).", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(func=run)


def script(shell: str) -> str:
    """The completion script for ``shell`` (one of :data:`SHELLS`)."""
    import argcomplete

    return argcomplete.shellcode(["envgen"], shell=shell)


def run(args: argparse.Namespace, ctx: Context) -> int:
    text = script(args.shell)
    if ctx.json:
        from envgen.cli.render import dump_json

        dump_json({"shell": args.shell, "script": text}, ctx.out)
    else:
        ctx.out.write(text)
    return 0
