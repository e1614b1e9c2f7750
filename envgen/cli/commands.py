"""The subcommands: name → (module, one-line help). ``envgen --help`` lists them from here;
only the module of the command being run is imported (start-up stays fast)."""

from __future__ import annotations

COMMANDS: dict[str, tuple[str | None, str]] = {
    "resolve": ("envgen.cli.resolve_cmd", "rank the combinations for a request"),
    "make": ("envgen.cli.make_cmd", "resolve and lock an environment"),
    "install": ("envgen.cli.install_cmd", "install a lock into a prefix"),
    "drift": ("envgen.cli.drift_cmd",
              "check a lock against today's indexes, facts and evidence (yanked, newer, changed)"),
    "whatif": ("envgen.cli.whatif_cmd",
               "what another torch, release, CUDA, Python, OS or GPU would change for a lock"),
    "build": ("envgen.cli.build_cmd", "build a lock's image with its ops"),
    "results": ("envgen.cli.results_cmd", "store result records; tiers, status"),
    "evidence": ("envgen.cli.evidence_cmd",
                 "lock and build combinations, recording T1/T2 evidence"),
    "table": ("envgen.cli.table_cmd", "generate the compatibility table"),
    "verify": ("envgen.cli.verify_cmd", "check ops and a multi-process run"),
    "doctor": ("envgen.cli.doctor_cmd",
               "diagnose an environment (live, a snapshot or a pasted report) and say the fix"),
    "preflight": ("envgen.cli.preflight_cmd",
                  "check every node of a multi-node job before it launches"),
    "matrix": (None, "show or refresh the compatibility matrix"),
    "completion": ("envgen.cli.completion_cmd", "print the shell completion script"),
}

MATRIX_COMMANDS: dict[str, tuple[str, str]] = {
    "show": ("envgen.cli.matrix_show", "show the facts (filterable)"),
    "update": ("envgen.cli.matrix_update",
               "refresh matrix/harvested/ from package indexes (shows a diff)"),
    "github": ("envgen.cli.matrix_github", "GPU CI matrix JSON of cells due"),
}


def help_for(name: str, group: str | None = None) -> str:
    """The one-line help of command ``name`` (``group``: "matrix" for its subcommands)."""
    return (MATRIX_COMMANDS if group == "matrix" else COMMANDS)[name][-1]
