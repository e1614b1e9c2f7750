#!/usr/bin/env bash
# The README's newcomer path, run as written in a fresh Debian 12 container from a clean
# checkout (tests/newcomer/test_readme_container.py starts it; `nox -s newcomer`). Needs PyPI
# and the Debian mirror. Each step prints "== step" so the test can say which one failed.
set -euo pipefail
step() { printf '\n== %s\n' "$*"; }
step "OS packages a Debian user has or installs (python3-venv; the lock's OS packages)"
apt-get update -qq && apt-get install -y -qq --no-install-recommends python3 python3-venv \
    python3-dev gcc g++ libaio-dev ca-certificates >/dev/null
cd /src
step "README: set up and run the main job"
python3 -m venv .venv && . .venv/bin/activate && pip install -q . && envgen make --framework deepspeed --flavor venv
lock=$(ls -d locks/*)
step "envgen install"
envgen install "$lock" --prefix ./env
step "envgen doctor"
envgen doctor --python ./env/bin/python
step "a CPU op build inside the env (DeepSpeed cpu_adam, JIT)"
./env/bin/python - <<'PY'
import os
from deepspeed.ops.op_builder.cpu import CPUAdamBuilder
module = CPUAdamBuilder().load()
print("built", module.__file__, "with CC", os.environ.get("CC"), "CUDA_HOME", os.environ["CUDA_HOME"])
assert module.__file__.startswith(os.environ["TORCH_EXTENSIONS_DIR"])
PY
step "the image's lock, no extra flags, and its build plan"
envgen make --framework deepspeed --flavor venv --image --out image-locks
envgen build "$(ls -d image-locks/*)" --dry-run
step "envgen whatif"
envgen whatif --lock "$lock" --torch 2.14
step "envgen drift"
envgen drift --lock "$lock"
step "done"
