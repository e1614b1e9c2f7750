"""Shell completion (`envgen completion bash|zsh|fish`): the real shells, sourcing the real
script, complete commands, options and the matrix's values through the installed envgen."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.run import run_envgen

pytestmark = pytest.mark.integration

BIN = str(Path(sys.executable).parent)  # where the venv's `envgen` script is
BASH = r'''
source <(envgen completion bash)
line="$1"; COMP_LINE="$line"; read -ra COMP_WORDS <<< "$line"
[[ "$line" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_POINT=${#COMP_LINE}
_python_argcomplete envgen
printf '%s\n' "${COMPREPLY[@]}"
'''


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}


def _shell(name: str) -> str:
    found = shutil.which(name)
    if not found:
        if os.environ.get("ENVGEN_REQUIRE_SHELLS"):
            pytest.fail(f"{name} is not installed (bash tests/support/shells-up.sh)")
        pytest.skip(f"{name} is not installed (bash tests/support/shells-up.sh installs it)")
    if not shutil.which("envgen", path=BIN):
        pytest.skip("no envgen console script next to this Python (pip install -e .)")
    return found


def bash_complete(line: str) -> list[str]:
    proc = subprocess.run([_shell("bash"), "-c", BASH, "bash", line], capture_output=True,
                          text=True, env=_env(), timeout=60, check=True)
    return [w.strip() for w in proc.stdout.splitlines() if w.strip()]


@pytest.mark.parametrize("line,expected", [
    ("envgen res", ["resolve", "results"]),
    ("envgen comp", ["completion"]),
    ("envgen resolve --fr", ["--framework", "--framework-version"]),
    ("envgen resolve --framework ", ["deepspeed", "megatron-core", "colossalai"]),
    ("envgen make --os ubuntu-2", ["ubuntu-20.04", "ubuntu-22.04", "ubuntu-24.04"]),
    ("envgen resolve --flavor ", ["conda", "venv", "os-package"]),
    ("envgen completion ", ["bash", "zsh", "fish"]),
])
def test_bash_completes_commands_options_and_values(line, expected):
    assert sorted(bash_complete(line)) == sorted(expected)


def test_bash_completes_a_gpu_name_and_a_cuda_version():
    assert "H100" in bash_complete("envgen resolve --gpu H")
    cudas = bash_complete("envgen resolve --cuda 12.")
    assert "12.1" in cudas and all(c.startswith("12.") for c in cudas)


def test_fish_completes_with_descriptions():
    proc = subprocess.run([_shell("fish"), "-c", "envgen completion fish | source; "
                           "complete -C 'envgen resolve --fr'; "
                           "complete -C 'envgen resolve --framework '"],
                          capture_output=True, text=True, env=_env(), timeout=60, check=True)
    lines = proc.stdout.splitlines()
    assert any(line.startswith("--framework\t") for line in lines)
    assert {"deepspeed", "megatron-core", "colossalai"} <= {line.split("\t")[0] for line in lines}


def test_zsh_loads_the_script_and_envgen_answers_in_zshs_format(tmp_path):
    zsh = _shell("zsh")
    check = subprocess.run([zsh, "-f", "-c", 'autoload -U compinit && compinit -u -d '
                            f'{tmp_path}/zcompdump && eval "$(envgen completion zsh)" && '
                            "print -r -- $_comps[envgen]"],
                           capture_output=True, text=True, env=_env(), timeout=60)
    assert check.returncode == 0, check.stderr
    assert check.stdout.strip() == "_python_argcomplete"
    # the protocol the zsh function speaks: envgen writes the candidates to fd 8
    read, write = os.pipe()
    line = "envgen resolve --framework "
    proc = subprocess.run([shutil.which("envgen", path=BIN)], pass_fds=(write,),
                          env={**_env(), "_ARGCOMPLETE": "1", "_ARGCOMPLETE_SHELL": "zsh",
                               "COMP_LINE": line, "COMP_POINT": str(len(line)),
                               "_ARGCOMPLETE_STDOUT_FILENAME": f"/dev/fd/{write}"},
                          capture_output=True, timeout=60)
    os.close(write)
    with os.fdopen(read) as f:
        answer = f.read()
    assert proc.returncode == 0, proc.stderr
    assert {"deepspeed", "megatron-core", "colossalai"} <= {
        w.split(":")[0] for w in answer.replace("\x0b", "\n").split("\n") if w}


def test_an_unknown_shell_is_a_usage_error():
    proc = run_envgen("completion", "tcsh")
    assert proc.returncode == 2
    assert "invalid choice: 'tcsh'" in proc.stderr
    proc = run_envgen("completion", "csh", "--json")
    assert proc.returncode == 2 and '"error"' in proc.stdout


def test_the_script_json():
    import json

    proc = run_envgen("completion", "bash", "--json")
    doc = json.loads(proc.stdout)
    assert doc["shell"] == "bash" and "_python_argcomplete" in doc["script"]
