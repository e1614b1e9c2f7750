"""Real broken environments on CPU, one fault each: the failure, the doctor's finding, its fix.

The images (tests/support/broken_envs/cpu/Dockerfile, built once per module, sharing their
layers) are Debian bookworm with a Python 3.11 venv /opt/env holding the CPU build of torch (the
newest /opt/wheels/torch-*+cpu-cp311-*.whl) and DeepSpeed 0.19.8 from PyPI without prebuilt ops
(DS_BUILD_OPS=0), which JIT-builds its ops with its CPU accelerator; envgen is in /opt/envgen.

    fault                 image                              the op build that fails
    libaio_missing        envgen-test/broken-cpu-libaio:1    async_io (no libaio-dev)
    ninja_missing         envgen-test/broken-cpu-ninja:1     cpu_adam (the ninja wheel removed)
    dependency_conflict   envgen-test/broken-cpu-pydantic:1  `import deepspeed`, pin_memory
                                                             (pydantic 1.10 forced in)

For each, in a fresh container on the default bridge network (the fixes reach the Debian mirror
and PyPI):
1. the build fails with its real error text;
2. `envgen doctor --python /opt/env/bin/python --json` names the fault: an error finding of that
   kind with a command, exit 1;
3. that command, run verbatim with `sh -c` (an `export ...` one prefixes the next steps' shell),
   succeeds, and the same build then loads the op (async_io: DeepSpeed's own check for it
   passes; its full compile, ~4 min, is marked op_compile and runs in `nox -s doctor_envs`);
4. the doctor, run again, has no error finding left (exit 0).
A control: the same environment with libaio-dev and ninja (envgen-test/broken-cpu-good:1) has no
error finding.

Needs root and dockerd (tests/support/docker-up.sh); skipped without them unless
ENVGEN_REQUIRE_DOCKER=1. Costs, on a 2-core machine: images cold ~1.5 min (warm: seconds);
the module ~3-4 min warm without the op_compile test (async_io's full build: ~4 min more, 12
files), cpu_adam's 1-1.5 min, pin_memory's <1 min; each step prints its time (-s).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from support.broken_envs import common
from support.broken_envs.common import Container, doctor

pytestmark = [pytest.mark.docker, pytest.mark.broken_env]

HERE = common.REPO / "tests" / "support" / "broken_envs" / "cpu"
IMAGES = {  # Dockerfile target -> tag
    "libaio-missing": "envgen-test/broken-cpu-libaio:1",
    "ninja-missing": "envgen-test/broken-cpu-ninja:1",
    "dependency-conflict": "envgen-test/broken-cpu-pydantic:1",
    "good": "envgen-test/broken-cpu-good:1",
}
ENV_PY = "/opt/env/bin/python"
DOCTOR = f"--python {ENV_PY} --framework deepspeed -q"


def load_op(builder: str, marker: str) -> str:
    """A shell command: DeepSpeed's JIT build and load of one op, printing MARKER when loaded."""
    return (f"{ENV_PY} -c 'from deepspeed.ops.op_builder import {builder}; "
            f"{builder}().load(verbose=True); print(\"{marker}\")'")


ASYNC_IO = load_op("AsyncIOBuilder", "ASYNC_IO_LOADED")
CPU_ADAM = load_op("CPUAdamBuilder", "CPU_ADAM_LOADED")
ASYNC_IO_CHECK = (f"{ENV_PY} -c 'from deepspeed.ops.op_builder import AsyncIOBuilder; "
                  "print(\"ASYNC_IO_COMPATIBLE\", AsyncIOBuilder().is_compatible(verbose=True))'")
PIN_MEMORY = load_op("PinMemoryBuilder", "PIN_MEMORY_LOADED")  # the cheapest op: 3 files, no -O3
IMPORT = f"{ENV_PY} -c 'import deepspeed; print(\"DEEPSPEED\", deepspeed.__version__)'"


def step(name: str):
    return common.step(name, prefix="broken-cpu")


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Iterator[dict[str, str]]:
    """Build the four images (one context, shared layers); their tags by target."""
    with step("docker-up"):
        base = common.docker_base()
    wheel = common.cpu_torch_wheel()
    ctx = common.make_context(tmp_path_factory.mktemp("broken-cpu") / "context",
                              HERE / "Dockerfile", {f"cpu-wheels/{wheel.name}": wheel})
    for target, tag in IMAGES.items():
        with step(f"image {target}"):
            common.build(ctx, target, tag, base)
    yield IMAGES
    print("\n[broken-cpu] times: " + ", ".join(f"{n} {s:.0f} s" for n, s in common.TIMES),
          flush=True)


def errors(doc: dict) -> list[dict]:
    return [f for f in doc["findings"] if f["severity"] == "error"]


def named(ctr: Container, kind: str, args: str) -> tuple[dict, dict]:
    """Step 2: the doctor's error finding of ``kind`` (exit 1); (the finding, the document)."""
    with step(f"{kind}: doctor names it"):
        rc, doc, out = doctor(ctr, args)
    assert doc is not None, out[-3000:]
    assert rc == 1, out[-3000:]
    found = [f for f in errors(doc) if f["kind"] == kind]
    assert found, (f"no {kind} error finding; findings: {json.dumps(doc['findings'], indent=1)}"
                   f"; needs: {doc['needs']}")
    finding = found[0]
    print(f"[broken-cpu] {kind}: the doctor printed: command={finding['command']!r} "
          f"summary={finding['summary']!r}", flush=True)
    assert finding["command"], finding
    assert finding["source"] and finding["fix"], finding
    return finding, doc


def apply_fix(ctr: Container, kind: str, command: str) -> str:
    """Step 3: run the command as printed; the shell prefix later steps need (an ``export``)."""
    if command.lstrip().startswith("export "):
        return command.rstrip().rstrip(";") + ";"
    with step(f"{kind}: the fix `{command}`"):
        rc, out = ctr.sh(command, timeout=900)
    assert rc == 0, out[-3000:]
    return ""


def fixed(ctr: Container, kind: str, args: str, prefix: str) -> dict:
    """Step 4: the doctor again, in the fixed environment: no error finding, exit 0."""
    with step(f"{kind}: doctor after the fix"):
        rc, doc, out = doctor(ctr, args, prefix=prefix)
    assert doc is not None, out[-3000:]
    shown = json.dumps(doc["findings"], indent=1)
    assert not [f for f in doc["findings"] if f["kind"] == kind], shown
    assert rc == 0 and not errors(doc), shown
    return doc


def _libaio_fault_named_and_fixed(ctr: Container) -> str:
    """libaio_missing's steps 1-3: the async_io build fails with DeepSpeed's own words, the
    doctor names the fault, its command runs; returns the shell prefix the fix left."""
    with step("libaio_missing: async_io build fails"):
        rc, out = ctr.sh(ASYNC_IO)
    assert rc != 0 and "ASYNC_IO_LOADED" not in out, out[-3000:]
    # DeepSpeed's own check (it compiles and links a call of io_submit with -laio) refuses
    assert "async_io requires the dev libaio .so object and headers but these were not found" \
        in out, out[-3000:]
    assert "please install the libaio-dev package with apt" in out
    assert "RuntimeError: Unable to JIT load the async_io op due to it not being compatible" \
        in out, out[-3000:]
    finding, doc = named(ctr, "libaio_missing", f"{DOCTOR} --op async_io")
    assert doc["snapshot"]["libaio"]["headers"] is False
    assert "libaio-dev" in finding["command"]
    return apply_fix(ctr, "libaio_missing", finding["command"])


def test_libaio_missing(images):
    """After the fix, DeepSpeed's own gate for the op passes: is_compatible compiles and links
    a program calling io_submit with -laio (what refused the build). The op's full compile
    after the fix (~4 min here) is test_libaio_fix_builds_async_io (`nox -s doctor_envs`)."""
    with Container(images["libaio-missing"]) as ctr:
        prefix = _libaio_fault_named_and_fixed(ctr)
        with step("libaio_missing: DeepSpeed's async_io check passes after the fix"):
            rc, out = ctr.sh(prefix + ASYNC_IO_CHECK)
        assert rc == 0 and "ASYNC_IO_COMPATIBLE True" in out, out[-3000:]
        assert "requires the dev libaio" not in out, out[-3000:]
        doc = fixed(ctr, "libaio_missing", f"{DOCTOR} --op async_io", prefix)
        assert doc["snapshot"]["libaio"] == {"library": True, "headers": True}


@pytest.mark.op_compile
def test_libaio_fix_builds_async_io(images):
    """The same fault and fix, then DeepSpeed's full JIT build of async_io loads the op."""
    with Container(images["libaio-missing"]) as ctr:
        prefix = _libaio_fault_named_and_fixed(ctr)
        with step("libaio_missing: async_io builds after the fix"):
            rc, out = ctr.sh(prefix + ASYNC_IO, timeout=1500)
        assert rc == 0 and "ASYNC_IO_LOADED" in out, out[-3000:]
        assert "-laio" in out  # the real link line of async_io.so
        fixed(ctr, "libaio_missing", f"{DOCTOR} --op async_io", prefix)


def test_ninja_missing(images):
    args = f"{DOCTOR} --op cpu_adam"
    with Container(images["ninja-missing"]) as ctr:
        with step("ninja_missing: cpu_adam build fails"):
            rc, out = ctr.sh(CPU_ADAM)
        assert rc != 0 and "CPU_ADAM_LOADED" not in out, out[-3000:]
        assert "RuntimeError: Ninja is required to load C++ extensions" in out, out[-3000:]
        assert "Unable to JIT load the cpu_adam op due to ninja not being installed" in out

        finding, doc = named(ctr, "ninja_missing", args)
        assert doc["snapshot"].get("ninja") is None
        assert "ninja" in finding["command"]
        prefix = apply_fix(ctr, "ninja_missing", finding["command"])

        with step("ninja_missing: cpu_adam builds after the fix"):
            rc, out = ctr.sh(prefix + CPU_ADAM, timeout=1200)
        assert rc == 0 and "CPU_ADAM_LOADED" in out, out[-3000:]
        assert "cpu_adam.so" in out  # ninja's link step ran
        doc = fixed(ctr, "ninja_missing", args, prefix)
        assert doc["snapshot"]["ninja"]


def test_dependency_conflict(images):
    args = DOCTOR
    with Container(images["dependency-conflict"]) as ctr:
        with step("dependency_conflict: import deepspeed and the op build fail"):
            rc, out = ctr.sh(IMPORT)
            assert rc != 0, out[-3000:]
            assert "ImportError: cannot import name" in out and "from 'pydantic'" in out, out
            rc, out = ctr.sh(PIN_MEMORY)
            assert rc != 0 and "ImportError: cannot import name" in out, out[-3000:]
            rc, out = ctr.sh(f"{ENV_PY} -m pip check")
            assert rc == 1, out
            assert "deepspeed 0.19.8 has requirement pydantic>=2.0.0, but you have pydantic 1.10" \
                in out, out

        finding, doc = named(ctr, "dependency_conflict", args)
        assert "pydantic" in finding["command"]
        # the failing import is a fact too: import_failed, with the real ImportError
        failed = [f for f in errors(doc) if f["kind"] == "import_failed"]
        assert failed and "cannot import name" in failed[0]["summary"], doc["findings"]
        assert any(c.get("package", "").lower() == "deepspeed"
                   for c in doc["snapshot"].get("conflicts") or []), doc["snapshot"]
        prefix = apply_fix(ctr, "dependency_conflict", finding["command"])

        with step("dependency_conflict: import and op build after the fix"):
            rc, out = ctr.sh(prefix + IMPORT)
            assert rc == 0 and "DEEPSPEED 0.19.8" in out, out[-3000:]
            rc, out = ctr.sh(prefix + PIN_MEMORY, timeout=1200)
        assert rc == 0 and "PIN_MEMORY_LOADED" in out and "pin_memory.so" in out, out[-3000:]
        doc = fixed(ctr, "dependency_conflict", args, prefix)
        assert not doc["snapshot"].get("conflicts")


def test_good_environment_has_no_error(images):
    """The control: libaio-dev and ninja present, pip check clean: nothing to fix."""
    with Container(images["good"]) as ctr, step("good: doctor"):
        rc, doc, out = doctor(ctr, f"{DOCTOR} --op async_io --op cpu_adam")
    assert doc is not None, out[-3000:]
    assert rc == 0 and not errors(doc), json.dumps(doc["findings"], indent=1)
    assert doc["snapshot"]["frameworks"].get("deepspeed") == "0.19.8"
    assert doc["snapshot"]["torch"].endswith("+cpu")
