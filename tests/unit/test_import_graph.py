"""The package's shape, enforced: stages import only the layers below them, never upward.

    cli → api → stages → facts → base
    stages, in pipeline order: resolve → lock → image → results → verify → evidence
    harvest and ci read facts (ci also asks the resolver and the records); doctor judges with
    the resolver's facts and rules

Every import counts (module level and inside functions). Module-level imports must also be free
of cycles. The scripts that run inside images (envgen/inside/) import nothing from envgen.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "envgen"

BASE = {"<root>", "errors", "http", "progress", "versions", "validate", "atomic", "config",
        "gpus", "machine_gpus", "ids", "schemas", "shellcmd", "proc", "workers", "userfile",
        "writelock"}
STAGES = ("resolve", "lock", "image", "results", "verify", "evidence")
ALLOWED: dict[str, set[str]] = {"facts": set()}
for i, stage in enumerate(STAGES):
    ALLOWED[stage] = {"facts", *STAGES[:i]}
ALLOWED.update({
    "harvest": {"facts"},
    "ci": {"facts", "resolve", "results"},
    "doctor": {"facts", "resolve", "lock", "results"},
    "preflight": {"facts", "resolve", "lock", "results", "doctor"},
    "inside": set(),
    "api": {"facts", *STAGES, "harvest", "ci", "doctor", "preflight", "inside"},
    "cli": {"facts", *STAGES, "harvest", "ci", "doctor", "preflight", "inside", "api"},
    "__main__": {"cli"},
})
# they ship envgen/inside's scripts to targets (doctor: its collector, run by the target's python)
for stage in ("image", "verify", "evidence", "doctor", "preflight"):
    ALLOWED[stage].add("inside")


def _layer(module: str) -> str:
    parts = module.split(".")
    return "<root>" if len(parts) == 1 else parts[1]


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (PACKAGE.parent / rel).with_suffix(".py").is_file() or (
        PACKAGE.parent / rel / "__init__.py").is_file()


def _imports(path: Path, module: str) -> list[tuple[str, bool, int]]:
    """(imported envgen module, at module level?, line) for every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = set(map(id, tree.body))
    found = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                names = [".".join([*base, node.module] if node.module else base)]
            else:
                names = [node.module or ""]
            # `from envgen import inside`: the submodule, when it is one
            names = [f"{names[0]}.{a.name}" if _is_module(f"{names[0]}.{a.name}") else names[0]
                     for a in node.names]
        for name in names:
            if name == "envgen" or name.startswith("envgen."):
                found.append((name, id(node) in top, node.lineno))
    return found


MODULES = _modules()
EDGES = {m: _imports(p, m) for m, p in MODULES.items()}


def test_every_package_has_a_layer():
    layers = {_layer(m) for m in MODULES}
    unknown = layers - BASE - set(ALLOWED)
    assert not unknown, f"add {sorted(unknown)} to the layers in {__file__}"


def test_no_upward_imports():
    bad = []
    for module, imports in EDGES.items():
        src = _layer(module)
        for target, _, line in imports:
            dst = _layer(target)
            if dst == src or (dst in BASE and src not in ("inside",)):
                continue
            if src in BASE:
                if dst not in BASE:
                    bad.append(f"{module}:{line} imports {target} (base imports only base)")
                continue
            if dst not in ALLOWED[src]:
                bad.append(f"{module}:{line} imports {target} ({src} may import only "
                           f"{sorted(ALLOWED[src]) or 'nothing but base'})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_module_level_imports_have_no_cycles():
    graph: dict[str, set[str]] = defaultdict(set)
    for module, imports in EDGES.items():
        for target, at_top, _ in imports:
            while target not in MODULES and "." in target:  # `from pkg import name`
                target = target.rpartition(".")[0]
            if at_top and target != module:
                graph[module].add(target)
    # a module's package __init__ runs first: an edge pkg.mod → pkg is not a cycle by itself
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if node.startswith(nxt + "."):
                continue
            if state.get(nxt) == 1:
                cycles.append(" → ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for module in sorted(MODULES):
        if module not in state:
            visit(module, [])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("layer", sorted({_layer(m) for m in MODULES} - BASE - {"__main__"}))
def test_each_stage_says_what_it_takes_and_gives(layer):
    """A newcomer reading envgen/ sees each stage's inputs and outputs in its docstring."""
    init = PACKAGE / layer / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) if init.exists() else None
    assert doc and len(doc) > 60, f"envgen/{layer}/__init__.py needs a docstring naming its " \
                                  "inputs and outputs"
