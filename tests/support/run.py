"""Run envgen as a user does: a subprocess, so exit codes and stderr are the real ones; or
in-process (``in_process``) where a test only reads the CLI's output and is run many times."""

from __future__ import annotations

import subprocess
import sys

HOST_PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def run_envgen(*args: str, env: dict | None = None, timeout: float = 120):
    return subprocess.run([sys.executable, "-m", "envgen", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, check=False)


def in_process(matrix, capsys, monkeypatch, tmp_path):
    """``run(*argv) -> (exit code, stdout, stderr)``: envgen's CLI against ``matrix``, in this
    process, from an empty working directory (no envgen.toml / pyproject.toml of the checkout)."""
    from envgen.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENVGEN_MATRIX_DIR", str(matrix))

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run
