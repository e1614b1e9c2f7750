"""Schema validation: jsonschema against fastjsonschema on envgen's own data, and what envgen's
validator (envgen.schemas.check: fastjsonschema decides, jsonschema lists the problems) costs.

    python benchmarks/bench_schemas.py [--repeat 7]

Validates every file of matrix/ (harvested JSON, curated TOML, sources.toml, cells.toml) and
every record in matrix/results (plus the verify records of tests/fixtures/results, as
matrix/results holds attempt records only) with each library: a compiled validator per
schema, each document checked whole. Also: the first use in a fresh process (import and
compile, the part a short command pays; envgen's validator keeps the code fastjsonschema
generates in the user's cache, "cold" before and "warm" after the first run), and listing
every problem of an invalid document.
Prints medians in milliseconds and the ratio jsonschema / fastjsonschema (each as its
documentation shows it used). The "envgen" column is ``envgen.schemas.check``: fastjsonschema
on schemas with their ``$ref``s inlined and short errors, its code cached, jsonschema only to
list the problems of an invalid document.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from timing import median_ms  # noqa: E402

from envgen.schemas.check import load_schema  # noqa: E402


def documents() -> dict[str, list[tuple[str, object]]]:
    """(schema name, document) groups: the matrix files and the records."""
    m = ROOT / "matrix"
    files = [("harvested-" + p.stem.replace("_", "-"), json.loads(p.read_text("utf-8")))
             for p in sorted((m / "harvested").glob("*.json"))]
    files += [("curated-" + p.stem, tomllib.loads(p.read_text("utf-8")))
              for p in sorted((m / "curated").glob("*.toml"))]
    files += [(n, tomllib.loads((m / f"{n}.toml").read_text("utf-8")))
              for n in ("sources", "cells")]
    records = []
    for p in sorted([*(m / "results").glob("*/*.json"),
                     *(ROOT / "tests/fixtures/results").glob("*.json")]):
        data = json.loads(p.read_text("utf-8"))
        records.append(("result-record" if data["schema"] == 1 else "attempt-record", data))
    return {"matrix files": files, "records": records}


def jsonschema_validators(names):
    from jsonschema.validators import validator_for

    return {n: validator_for(load_schema(n))(load_schema(n)) for n in names}


def fastjsonschema_validators(names):
    import fastjsonschema

    # fastjsonschema rewrites the $refs of the schema it is given: a copy each
    return {n: fastjsonschema.compile(copy.deepcopy(load_schema(n)), use_default=False)
            for n in names}


FRESH = {  # the first use in a fresh process: import, compile every schema of the group
    "jsonschema": "from jsonschema.validators import validator_for\n"
                  "v = [validator_for(s)(s) for s in schemas]\n",
    "fastjsonschema": "import copy, fastjsonschema\n"
                      "v = [fastjsonschema.compile(copy.deepcopy(s), use_default=False) "
                      "for s in schemas]\n",
    "envgen (cache cold)": "from envgen.schemas.check import validator\n"
                           "v = [validator(n) for n in names]\n",
    "envgen (cache warm)": "from envgen.schemas.check import validator\n"
                           "v = [validator(n) for n in names]\n",
}


def fresh_ms(kind: str, names: list[str], repeat: int) -> float:
    """Median of the first use in a fresh process, timed inside it (no interpreter start)."""
    code = ("import json, sys, time\n"
            f"sys.path.insert(0, {str(ROOT)!r})\n"
            f"names = {names!r}\n"
            "import envgen.config\n"  # a command has read its configuration already
            "from envgen.schemas.check import load_schema\n"
            "schemas = [load_schema(n) for n in names]\n"
            "t0 = time.perf_counter()\n"
            + FRESH[kind] +
            "print(time.perf_counter() - t0)\n")
    times = []
    with tempfile.TemporaryDirectory(prefix="envgen-bench-schemas-") as tmp:
        env = dict(os.environ, ENVGEN_CACHE_DIR=tmp)
        for i in range(repeat):
            if kind == "envgen (cache cold)":
                env["ENVGEN_CACHE_DIR"] = f"{tmp}/{i}"
            elif i == 0 and kind == "envgen (cache warm)":
                subprocess.run([sys.executable, "-c", code], env=env, check=True,
                               capture_output=True)  # fills the cache
            out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                 capture_output=True, text=True).stdout
            times.append(float(out))
    return statistics.median(times) * 1000


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    groups = documents()
    names = sorted({n for docs in groups.values() for n, _ in docs})
    js, fj = jsonschema_validators(names), fastjsonschema_validators(names)
    for docs in groups.values():  # both must agree that everything committed is valid
        for name, doc in docs:
            assert js[name].is_valid(doc), name
            fj[name](doc)

    from envgen.schemas.check import validator

    print(f"{'valid documents, warm':34} {'jsonschema':>11} {'fastjsonschema':>15} "
          f"{'ratio':>6} {'envgen':>8}")
    for label, docs in groups.items():
        t_js = median_ms(lambda docs=docs: [js[n].is_valid(d) for n, d in docs], args.repeat)
        t_fj = median_ms(lambda docs=docs: [fj[n](d) for n, d in docs], args.repeat)
        t_eg = median_ms(lambda docs=docs: [validator(n).check(d) for n, d in docs],
                         args.repeat)
        print(f"{label + f' ({len(docs)})':34} {t_js:11.2f} {t_fj:15.2f} {t_js / t_fj:6.1f} "
              f"{t_eg:8.2f}")
        per = [(t / len(docs)) * 1000 for t in (t_js, t_fj, t_eg)]
        print(f"{'  per document, µs':34} {per[0]:11.0f} {per[1]:15.0f} {'':6} {per[2]:8.0f}")

    print(f"\n{'first use in a fresh process':34} {'jsonschema':>11} {'fastjsonschema':>15} "
          f"{'ratio':>6} {'envgen cold':>12} {'envgen warm':>12}")
    record_schemas = sorted({n for n, _ in groups["records"]})
    for label, group in (("record schemas", record_schemas), ("every schema", names)):
        t = {k: fresh_ms(k, group, args.repeat) for k in FRESH}
        print(f"{label + f' ({len(group)})':34} {t['jsonschema']:11.1f} "
              f"{t['fastjsonschema']:15.1f} {t['jsonschema'] / t['fastjsonschema']:6.1f} "
              f"{t['envgen (cache cold)']:12.1f} {t['envgen (cache warm)']:12.1f}")

    damaged = copy.deepcopy(dict(groups["matrix files"])["harvested-frameworks"])
    for row in damaged["releases"][:50]:
        row["version"] = 5
    t_js = median_ms(lambda: list(js["harvested-frameworks"].iter_errors(damaged)), args.repeat)
    t_eg = median_ms(lambda: validator("harvested-frameworks").check(damaged), args.repeat)
    print(f"\nevery problem of an invalid harvested/frameworks.json (50): jsonschema "
          f"{t_js:.1f} ms, envgen {t_eg:.1f} ms (fastjsonschema stops at the first)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
