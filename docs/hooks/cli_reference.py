"""mkdocs hook: add the CLI reference page ``cli.md``, generated from envgen's argparse parser.

The page is not a file in docs/: ``envgen.cli.reference.markdown()`` writes it from the parser
``envgen`` itself uses at every build, so it cannot fall behind the options. Needs envgen
importable (``nox -s docs`` installs it). Registered in mkdocs.yml under ``hooks:``.
"""

from __future__ import annotations

from mkdocs.structure.files import File, Files

URI = "cli.md"


def on_files(files: Files, config) -> Files:
    from envgen.cli.reference import markdown  # at build time: loading the hook stays cheap

    existing = files.get_file_from_path(URI)
    if existing is not None:
        files.remove(existing)
    files.append(File.generated(config, URI, content=markdown()))
    return files
