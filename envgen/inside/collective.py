"""One node's share of a real collective job: rendezvous, a checked all_reduce, its bandwidth.

Run by `envgen preflight` on every node at once (program text on stdin: ``python - ARGS``)::

    --master-addr A --master-port P --node-rank R --nnodes K [--nproc N]
    --backend gloo|nccl --timeout T --size-mb M --iters I

Standard library and torch only, Python >= 3.8. Each rank (global rank R*N + local) prints JSON
lines, flushed one by one, each with its ``rank``:

- ``{"event": "start", ...}`` once torch is imported;
- ``{"event": "rendezvous", "seconds": ...}`` when all W = K*N ranks have met;
- ``{"event": "check", "ok": ..., "expected": W(W+1)/2, "got": ...}``: every rank fills a
  tensor with rank+1 and all_reduces it (sum); the exact sum is checked on every element;
- ``{"event": "bandwidth", "bytes": ..., "seconds_median": ..., "algbw_gbps": ...,
  "busbw_gbps": ...}``: one warm-up and I timed all_reduces of an M MiB float32 tensor; the
  median time t gives ``algbw = bytes / t`` and ``busbw = algbw * 2(W-1)/W`` in GB/s (1e9
  bytes/s), as nccl-tests reports them (NVIDIA/nccl-tests doc/PERFORMANCE.md, "AllReduce":
  "B = S/t * (2*(n-1)/n) = algbw * (2*(n-1)/n)"; src/all_reduce.cu ``AllReduceGetBw``:
  ``baseBw = (double)(count * typesize) / 1.0E9 / sec``, factor ``2*(nranks - 1)/nranks``);
- ``{"event": "error", "stage": "import|rendezvous|allreduce", "error": ...}`` then exit 1
  (exit 2 when torch does not import);
- ``{"event": "timeout", "stage": "rendezvous|allreduce", "seconds": T, ...}`` then exit 3.

Rendezvous: the TCPStore that ``init_method="tcp://A:P"`` would create (torch/distributed/
rendezvous.py ``_tcp_rendezvous_handler`` → ``_create_c10d_store``: rank 0 hosts it, the others
connect), built here so that each rank can sign in under its own key before
``init_process_group(backend, store=..., rank, world_size, timeout)``. A rank whose wait runs
out reports which ranks signed in (``joined``) and which never did (``missing``): the node
that never arrived is named, not just "timed out". Gloo's init then connects every pair of
ranks; NCCL's communicator is created by the first all_reduce.

A watchdog thread ends a rank whose stage (rendezvous, then the all_reduces) runs past T + 2 s
(torch's own timeouts are T; the 2 s let its error, which says more, come first): it prints
the timeout line and calls ``os._exit(3)``, so a hang is reported, never silent. Exit 0 when
every rank of this node checked ok. The same thread writes an empty line each second: once the
preflight is gone (ssh killed), the write fails and the rank ends at once (exit 4).

``--hold`` (and no other argument): import torch at once, print ``{"event": "ready"}``, then
read one line from standard input — the arguments above as a JSON list — and run with them; an
empty line or end-of-file ends it (exit 0). The preflight starts it this way on every node while
it asks the nodes about themselves, so the ranks have torch imported when the all_reduce is due.

``--nproc N`` > 1 (NCCL: one process per GPU, CUDA device = local rank) forks N processes
after importing torch (CUDA is first touched in the children; the program arrives on stdin,
so there is no file to re-execute or for the "spawn" start method to import).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time
import traceback
from datetime import timedelta

CHECK_ELEMENTS = 1024
WATCHDOG_MARGIN = 2.0
JOIN_KEY = "envgen-preflight/joined"
DONE_KEY = "envgen-preflight/done"
ABORT_KEY = "envgen-preflight/abort"
HEARTBEAT = 1.0  # seconds between the empty lines that find out whether anyone still reads
_print_lock = threading.Lock()


def emit(obj: dict) -> None:
    line = json.dumps(obj, sort_keys=True) + "\n"
    with _print_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:1500]}" if text else type(exc).__name__


class Watchdog:
    """Ends the process (exit 3) when the current stage runs past its deadline."""

    def __init__(self, rank: int, timeout: float) -> None:
        self.rank, self.timeout = rank, timeout
        self.stage = None  # type: str | None
        self.step = None  # type: str | None
        self.deadline = None  # type: float | None
        self._lock = threading.Lock()
        t = threading.Thread(target=self._run, name="envgen-watchdog", daemon=True)
        t.start()

    def arm(self, stage: str, step: str) -> None:
        with self._lock:
            self.stage, self.step = stage, step
            self.deadline = time.monotonic() + self.timeout + WATCHDOG_MARGIN

    def at(self, step: str) -> None:
        """Within the same stage (and deadline), the step now under way."""
        with self._lock:
            self.step = step

    def disarm(self) -> None:
        with self._lock:
            self.stage, self.deadline = None, None

    def _run(self) -> None:
        beat = time.monotonic()
        while True:
            time.sleep(0.1)
            if time.monotonic() - beat >= HEARTBEAT:
                beat = time.monotonic()
                self._alive()
            with self._lock:
                expired = self.deadline is not None and time.monotonic() > self.deadline
                stage, step = self.stage, self.step
            if expired:
                emit({"event": "timeout", "rank": self.rank, "stage": stage, "step": step,
                      "seconds": self.timeout, "by": "watchdog"})
                os._exit(3)


    @staticmethod
    def _alive() -> None:
        """An empty line every HEARTBEAT seconds (readers skip it): when the preflight is gone
        (its ssh killed, the pipe closed), writing fails and the rank ends at once instead of
        holding MASTER_PORT, or blocking in a rendezvous, until its own timeout."""
        try:
            with _print_lock:
                sys.stdout.write("\n")
                sys.stdout.flush()
        except OSError:  # BrokenPipeError: Python ignores SIGPIPE and raises instead
            os._exit(4)


def join(store, rank: int, world: int, deadline: float, timeout: float) -> None:
    """Sign in under this rank's key; wait until all ``world`` ranks have (or exit 3).

    The first rank whose wait runs out leaves the list of who signed in under ABORT_KEY, so
    the ranks still waiting report the same list at once (rank 0's exit takes the store away).
    """
    store.set(f"{JOIN_KEY}/{rank}", socket.gethostname())
    store.add(JOIN_KEY, 1)
    while store.add(JOIN_KEY, 0) < world:
        aborted = store.check([ABORT_KEY])
        if aborted or time.monotonic() > deadline:
            if aborted:
                joined = json.loads(store.get(ABORT_KEY).decode())
            else:
                joined = [r for r in range(world) if store.check([f"{JOIN_KEY}/{r}"])]
                store.set(ABORT_KEY, json.dumps(joined))
            emit({"event": "timeout", "rank": rank, "stage": "rendezvous", "step": "join",
                  "seconds": timeout, "joined": joined,
                  "missing": [r for r in range(world) if r not in joined]})
            sys.stdout.flush()
            if not aborted:
                time.sleep(0.3)  # let the others read ABORT_KEY before the store may go
            os._exit(3)
        time.sleep(0.05)


def run_rank(args: argparse.Namespace, local: int) -> int:
    import torch
    import torch.distributed as dist

    world = args.nnodes * args.nproc
    rank = args.node_rank * args.nproc + local
    timeout = args.timeout
    emit({"event": "start", "rank": rank, "local_rank": local, "world_size": world,
          "host": socket.gethostname(), "pid": os.getpid(), "torch": torch.__version__,
          "backend": args.backend, "python": sys.version.split()[0]})
    device = torch.device("cpu")
    if args.backend == "nccl":  # CUDA first touched here, in the (forked) rank's process
        try:
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if local >= count:
                raise RuntimeError(f"backend nccl: local rank {local} needs GPU {local}; torch "
                                   f"{torch.__version__} sees {count} CUDA device(s)")
            torch.cuda.set_device(local)
            device = torch.device("cuda", local)
        except Exception as exc:
            emit({"event": "error", "rank": rank, "stage": "import", "error": short(exc)})
            return 2
    dog = Watchdog(rank, timeout)
    stage, step = "rendezvous", "store"
    try:
        dog.arm(stage, step)
        t0 = time.monotonic()
        store = dist.TCPStore(args.master_addr, args.master_port, world, rank == 0,
                              timedelta(seconds=timeout), wait_for_workers=False)
        step = "join"
        dog.at(step)
        join(store, rank, world, t0 + timeout, timeout)
        step = "init"
        dog.at(step)
        dist.init_process_group(args.backend, store=store, rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout))
        emit({"event": "rendezvous", "rank": rank, "seconds": round(time.monotonic() - t0, 3)})

        stage, step = "allreduce", "check"
        dog.arm(stage, step)
        expected = world * (world + 1) // 2
        t = torch.full((CHECK_ELEMENTS,), float(rank + 1), dtype=torch.float32, device=device)
        dist.all_reduce(t)
        lo, hi = float(t.min().item()), float(t.max().item())
        ok = lo == hi == float(expected)
        got = int(lo) if lo == hi and lo.is_integer() else {"min": lo, "max": hi}
        emit({"event": "check", "rank": rank, "ok": ok, "expected": expected, "got": got})
        if not ok:
            return 1

        step = "bandwidth"
        dog.arm(stage, step)
        numel = max(1, args.size_mb * 1024 * 1024 // 4)
        data = torch.ones(numel, dtype=torch.float32, device=device)
        times = []
        for i in range(args.iters + 1):  # the first is the warm-up
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            t1 = time.perf_counter()
            dist.all_reduce(data)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i:
                times.append(time.perf_counter() - t1)
        median = statistics.median(times)
        nbytes = numel * 4
        algbw = nbytes / 1e9 / median
        emit({"event": "bandwidth", "rank": rank, "bytes": nbytes, "iters": len(times),
              "seconds_median": round(median, 6), "algbw_gbps": round(algbw, 4),
              "busbw_gbps": round(algbw * 2 * (world - 1) / world, 4)})
        # rank 0 hosts the store: it leaves last, so no rank loses the store while finishing
        step = "finish"
        dog.at(step)
        store.add(DONE_KEY, 1)
        until = time.monotonic() + timeout
        while rank == 0 and store.add(DONE_KEY, 0) < world and time.monotonic() < until:
            time.sleep(0.05)
        dog.disarm()
    except Exception as exc:
        emit({"event": "error", "rank": rank, "stage": stage, "step": step, "error": short(exc),
              "where": traceback.format_exc(limit=3)[-800:]})
        return 1
    finally:
        try:
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:
            pass
    return 0


def _child(args: argparse.Namespace, local: int) -> None:
    code = 1
    try:
        code = run_rank(args, local)
    finally:
        sys.stdout.flush()
        os._exit(code)


def held() -> int:
    """``--hold``: torch imported first, then the arguments from one line of standard input."""
    failed = None
    try:
        import torch
        import torch.distributed as dist

        if not dist.is_available():
            raise ImportError(f"torch {torch.__version__} has no torch.distributed")
    except Exception as exc:  # said per rank once the arguments (and so the ranks) are known
        failed = exc
    emit({"event": "ready", "ok": failed is None})
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    argv = json.loads(line)
    if failed is not None:
        args = parse(argv)
        for local in range(args.nproc):
            emit({"event": "error", "rank": args.node_rank * args.nproc + local,
                  "stage": "import", "error": short(failed)})
        return 2
    return main(argv)


def parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="collective.py")
    parser.add_argument("--master-addr", required=True)
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument("--node-rank", type=int, required=True)
    parser.add_argument("--nnodes", type=int, required=True)
    parser.add_argument("--nproc", type=int, default=1)
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--size-mb", type=int, default=64)
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args(argv)
    if args.nproc < 1 or args.nnodes < 1 or args.iters < 1:
        parser.error("--nproc, --nnodes and --iters must be at least 1")
    return args


def main(argv) -> int:
    if list(argv) == ["--hold"]:
        return held()
    args = parse(argv)
    ranks = [args.node_rank * args.nproc + local for local in range(args.nproc)]
    try:
        import torch
        import torch.distributed as dist

        if not dist.is_available():
            raise ImportError(f"torch {torch.__version__} has no torch.distributed")
    except Exception as exc:
        for rank in ranks:
            emit({"event": "error", "rank": rank, "stage": "import", "error": short(exc)})
        return 2
    if args.nproc == 1:
        return run_rank(args, 0)
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_child, args=(args, local)) for local in range(args.nproc)]
    for p in procs:
        p.start()
    codes = []
    for p in procs:
        p.join()
        codes.append(p.exitcode if p.exitcode is not None else 1)
    bad = [c for c in codes if c != 0]
    return max(bad, key=abs) if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
