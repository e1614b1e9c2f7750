"""The README's newcomer path for real: in a fresh Debian 12 container (the tests' local base
image, nothing of this machine's), from a clean checkout (`git archive HEAD`), the Quick start
command exactly as README gives it, then `envgen install`, `envgen doctor` (exit 0), a JIT op
build inside the env, `--image` + `build --dry-run`, `whatif` and `drift`
(tests/newcomer/readme_path.sh). Real PyPI and the Debian mirror, several GB: marked network,
run by `nox -s newcomer`, not in the default run."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_COMMAND = ("python3 -m venv .venv && . .venv/bin/activate && pip install . && "
                  "envgen make --framework deepspeed --flavor venv")


def test_the_script_runs_the_readmes_command_as_written():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    script = (ROOT / "tests" / "newcomer" / "readme_path.sh").read_text(encoding="utf-8")
    assert README_COMMAND in readme
    assert README_COMMAND.replace("pip install .", "pip install -q .") in script


@pytest.mark.network
@pytest.mark.docker
def test_the_readme_path_in_a_fresh_container(docker_ready, tmp_path):
    archive = tmp_path / "checkout.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive),
                    "HEAD"], check=True, timeout=120)
    src = tmp_path / "src"
    src.mkdir()
    subprocess.run(["tar", "-xf", str(archive), "-C", str(src)], check=True, timeout=120)
    # behind a TLS-intercepting proxy a newcomer trusts its CA as this machine does: the
    # machine's bundle (or ENVGEN_CA_CERT), for pip, uv and envgen alike
    ca = os.environ.get("ENVGEN_CA_CERT") or "/etc/ssl/certs/ca-certificates.crt"
    pem = "/etc/envgen-test-ca.pem"
    trust = ["-v", f"{ca}:{pem}:ro", *(x for var in ("SSL_CERT_FILE", "PIP_CERT",
                                                      "REQUESTS_CA_BUNDLE")
                                       for x in ("-e", f"{var}={pem}"))
             ] if os.path.isfile(ca) else []
    proc = subprocess.run(
        ["/usr/bin/docker", "run", "--rm", "--network", "host", "-v", f"{src}:/src", *trust,
         docker_ready["base"], "bash", "/src/tests/newcomer/readme_path.sh"],
        capture_output=True, text=True, timeout=3600)
    log = proc.stdout + proc.stderr
    (ROOT / "artifacts").mkdir(exist_ok=True)
    (ROOT / "artifacts" / "newcomer.log").write_text(log, encoding="utf-8")
    steps = re.findall(r"^== (.*)$", proc.stdout, re.M)
    assert proc.returncode == 0, f"failed at: {steps[-1] if steps else 'start'}\n{log[-4000:]}"
    assert steps[-1] == "done"
    doctor = proc.stdout.split("== envgen doctor", 1)[1].split("\n== ", 1)[0]
    assert "cuda_minor_mismatch" not in doctor and "✗ error" not in doctor  # and it exited 0
