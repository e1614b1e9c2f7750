"""The child processes of collect_env.py: imports that may crash or hang (torch, the
frameworks, cached extension modules) run in ``collect_env.py --child`` processes, each task
with a time limit, so a segfault or a hang becomes a fact instead of stopping the collection.
Standard library only, Python 3.7 syntax; imported by collect_env.py as a sibling module.
"""

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time

from collect_parse import describe, nccl_text, one_line

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "collect_env.py")


def child_torch_facts(torch):
    """The facts an imported torch gives (runs in the child)."""
    facts = {"torch": str(torch.__version__)}
    cuda = getattr(torch.version, "cuda", None)
    facts["torch_cuda"] = str(cuda) if cuda else None
    with contextlib.suppress(Exception):
        facts["torch_cxx11_abi"] = bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    if not cuda:  # a CPU (or ROCm) build: no NCCL, no CUDA archs
        facts["torch_nccl"] = None
        facts["torch_arch_list"] = None
        return facts
    with contextlib.suppress(Exception):  # ncclGetVersion needs no GPU
        facts["torch_nccl"] = nccl_text(torch.cuda.nccl.version())
    try:  # torch.cuda.get_arch_list() answers [] without a GPU (torch < 2.6); this does not
        flags = torch._C._cuda_getArchFlags()
        facts["torch_arch_list"] = flags.split() if flags else None
    except Exception:
        pass
    return facts


def child_main(tasks):
    """Run ``tasks`` (JSON list of ["import", module] / ["load", name, file]) and print one
    JSON line per task as it starts and ends, so a crash still says where it happened."""
    real = os.fdopen(os.dup(1), "w")
    with contextlib.suppress(OSError):
        os.dup2(2, 1)  # what imports print goes to stderr
    sys.stdout = sys.stderr

    def say(doc):
        real.write(json.dumps(doc) + "\n")
        real.flush()

    import importlib
    import importlib.machinery
    import importlib.util

    torch = None
    for index, task in enumerate(tasks):
        say({"begin": index})
        result = {"done": index}
        try:
            if task[0] == "import":
                module = importlib.import_module(task[1])
                if task[1] == "torch":
                    torch = module
                    result["facts"] = child_torch_facts(module)
            else:
                if torch is None:
                    torch = importlib.import_module("torch")
                try:
                    load_extension(task[1], task[2])
                except ImportError as exc:
                    # an op built to be loaded after another (DeepSpeed's async_io needs
                    # pin_memory's symbols): load the other cached builds first, globally
                    if "undefined symbol" not in str(exc) or not task[3:] or not task[3]:
                        raise
                    import ctypes
                    for other in task[3]:
                        with contextlib.suppress(OSError):
                            ctypes.CDLL(other, mode=os.RTLD_GLOBAL | os.RTLD_LAZY)
                    load_extension(task[1], task[2])
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            result["error"] = describe(exc)
            if task[0] == "load" and torch is None:
                result["no_torch"] = True
        say(result)


def load_extension(name, path):
    """Import the extension module at ``path`` as torch's JIT loader does."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)


class Budget:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()


def _drain(stream, sink):
    for line in stream:
        sink.put(line)
    sink.put(None)


def run_child(cmd, budget, per_task):
    """Run ``cmd`` (a child printing begin/done lines), each task limited to ``per_task``
    seconds (and the budget): (its protocol lines, stderr, exit code, the limit it ran past
    or None)."""
    lines, errors = queue.Queue(), queue.Queue()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, errors="replace")
    for stream, sink in ((proc.stdout, lines), (proc.stderr, errors)):
        threading.Thread(target=_drain, args=(stream, sink), daemon=True).start()
    seen, timed_out = [], False
    limit = min(per_task, budget.left())
    deadline = time.monotonic() + limit
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            timed_out = True
            proc.kill()
            break
        if line is None:
            break
        seen.append(line)
        if line.startswith('{"begin"'):  # a new task: a new time limit
            limit = min(per_task, budget.left())
            deadline = time.monotonic() + limit
    code = proc.wait()
    stderr = []
    with contextlib.suppress(queue.Empty):
        while True:
            item = errors.get(timeout=1 if not timed_out else 0.1)
            if item is None:
                break
            stderr.append(item)
    return seen, "".join(stderr), code, limit if timed_out else None


def run_tasks(tasks, budget, per_task=60):
    """Results of ``tasks`` run in children of this script: {index: result}; a child that
    crashes or hangs (more than ``per_task`` seconds on one task) gives its task an error and
    the rest go on in a new child, while the budget lasts."""
    results = {}
    pending = list(range(len(tasks)))
    while pending and budget.left() > 1:
        batch = [tasks[i] for i in pending]
        cmd = [sys.executable, SCRIPT, "--child", json.dumps(batch)]
        try:
            stdout, stderr, code, timed_out = run_child(cmd, budget, per_task)
        except OSError:
            return results
        started = None
        for line in stdout:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if "begin" in doc:
                started = pending[doc["begin"]]
            elif "done" in doc:
                results[pending[doc["done"]]] = doc
                started = None
        if started is None and timed_out is None and code != 0:
            started = next((i for i in pending if i not in results), None)
        if started is not None:
            if timed_out is not None:
                error = f"timed out after {timed_out:.0f} s"
            else:
                tail = [ln for ln in (stderr or "").strip().splitlines() if ln.strip()]
                how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
                error = f"the process died ({how})" + (": " + tail[-1] if tail else "")
            results[started] = {"error": one_line(error)}
        elif timed_out is not None:
            break
        left = [i for i in pending if i not in results]
        if len(left) == len(pending):  # no progress: do not start it again
            break
        pending = left
    return results
