"""The plain standard-library baseline of `envgen matrix github` (bench_matrix_github.py):
the same files read, the same matrix printed (stdout) and the same summary line (stderr), with
nothing checked.

    python benchmarks/plain_matrix_github.py CELLS LOCKS RESULTS [--force]
"""

import json
import os
import re
import sys

import tomllib

ID = re.compile(r"^(?P<framework>[a-z0-9][a-z0-9_.-]*?)-(?P<fv>\d[^-]*)-torch(?P<torch>\d[^-]*)"
                r"-cu(?P<cuda>\d{3,})-py(?P<python>\d+\.\d+t?)-[a-z]+\d[\d.]*"
                r"-(?P<arch>x86_64|aarch64)$")


def key(text):
    return tuple(int(p) for p in text.split("."))


def aliases(cells):
    """The moving tag of the newest cell per framework x CUDA x arch (envgen's rule)."""
    best = {}
    for i, cell in enumerate(cells):
        m = ID.match(cell["combination"].strip())
        if m is None:
            continue
        alias = f"{m['framework']}-cu{m['cuda']}" + ("" if m["arch"] == "x86_64"
                                                      else f"-{m['arch']}")
        py = m["python"]
        rank = (key(m["fv"]), key(m["torch"]), (not py.endswith("t"), key(py.rstrip("t"))))
        if alias not in best or (rank, -i) > (best[alias][0], -best[alias][1]):
            best[alias] = (rank, i, cell["combination"])
    return {cid: alias for alias, (_r, _i, cid) in best.items()}


def main() -> int:
    cells_path, locks, results = sys.argv[1:4]
    force = "--force" in sys.argv[4:]
    with open(cells_path, "rb") as fh:
        cells = tomllib.load(fh).get("cell", [])
    verified = set()
    if os.path.isdir(results):
        for folder in sorted(os.listdir(results)):
            where = os.path.join(results, folder)
            if folder.startswith(".") or not os.path.isdir(where):
                continue
            for name in sorted(os.listdir(where)):
                if name.endswith(".json") and not name.startswith("."):
                    with open(os.path.join(where, name), "rb") as fh:
                        record = json.loads(fh.read())
                    if record.get("schema") == 1:
                        verified.add(record["lock_hash"])
    include, done, unlocked = [], 0, 0
    moving = aliases(cells)
    for cell in cells:
        cid = cell["combination"]
        try:
            with open(os.path.join(locks, cid, "envgen.lock.json"), "rb") as fh:
                lock_hash = json.loads(fh.read())["lock_hash"]
        except FileNotFoundError:
            lock_hash = None
        if lock_hash is None:
            unlocked += 1
        elif lock_hash in verified and not force:
            done += 1
            continue
        options = ["--flavor", cell.get("flavor", "conda")]
        if cell.get("gpu_arch"):
            options += ["--gpu-arch", cell["gpu_arch"]]
        if cell.get("base"):
            options += ["--base", cell["base"]]
        include.append({"combination": cid, "lock_hash": lock_hash,
                        "make_options": " ".join(options), "aliases": moving.get(cid, "")})
    print(f"{len(cells)} cells: {len(include)} due ({unlocked} not locked yet), {done} already "
          "verified", file=sys.stderr, flush=True)
    print(json.dumps({"include": include}, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
