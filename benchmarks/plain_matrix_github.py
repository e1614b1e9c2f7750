"""The plain standard-library baseline of `envgen matrix github` (bench_matrix_github.py):
the same files read, the same matrix printed (stdout) and the same summary line (stderr), with
nothing checked.

    python benchmarks/plain_matrix_github.py CELLS LOCKS RESULTS [--force]
"""

import json
import os
import sys

import tomllib


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
                        "make_options": " ".join(options)})
    print(f"{len(cells)} cells: {len(include)} due ({unlocked} not locked yet), {done} already "
          "verified", file=sys.stderr, flush=True)
    print(json.dumps({"include": include}, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
