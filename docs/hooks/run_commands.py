"""mkdocs hook: run the envgen commands a page asks for and show their real output.

A page writes ``<!-- envgen:run envgen resolve --framework deepspeed --cuda 12.1 -->`` on a line
of its own; at build the line becomes a ``console`` block with ``$ <command>`` and what the
command printed (stdout and stderr, exit code noted when not 0), run with this Python's envgen
from the project root at a fixed width (COLUMNS=100), so the output shown is always what the
documented version prints. Only ``envgen`` commands run; a command that runs longer than 120 s
fails the build. Registered in mkdocs.yml under ``hooks:``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

DIRECTIVE = re.compile(r"^<!-- envgen:run (?P<command>.+?) -->[ \t]*$", re.MULTILINE)
WIDTH = "100"


class CommandError(Exception):
    pass


def run(command: str, root: Path) -> str:
    """The console block for ``command``: ``$ command`` and its output."""
    argv = shlex.split(command)
    if not argv or argv[0] != "envgen":
        raise CommandError(f"envgen:run runs envgen commands only, not {command!r}")
    env = {**os.environ, "COLUMNS": WIDTH}
    done = subprocess.run([sys.executable, "-m", "envgen", *argv[1:]], cwd=root, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)
    out = (done.stdout + done.stderr).rstrip("\n")
    lines = [f"$ {command}", *(line.rstrip() for line in out.splitlines())]
    if done.returncode:
        lines.append(f"(exit code {done.returncode})")
    return "```console\n" + "\n".join(lines) + "\n```"


def on_page_markdown(markdown: str, page, config, files) -> str:
    root = Path(config.config_file_path).resolve().parent
    return DIRECTIVE.sub(lambda m: run(m.group("command"), root), markdown)
