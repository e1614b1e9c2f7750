"""The docs site builds with `mkdocs build --strict`: as committed, and with a table that has
evidence links (generated from the fixture records)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from results_data import REPO

from envgen.results import build_table, load
from envgen.results.table import HEADER, render_json, render_markdown

# mkdocs.yml lowers "link target not found" to INFO for the evidence links into
# ../matrix/results/; every other link must still resolve, which these tests check.
_NOT_FOUND = re.compile(r"contains a link '([^']*)', but the target (?:'[^']*' )?is not found")


def mkdocs_build(config: Path, site: Path) -> list[str]:
    """Build strictly; return the links mkdocs could not find."""
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(config), "--site-dir", str(site)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return _NOT_FOUND.findall(proc.stderr + proc.stdout)


def test_committed_docs_build_strictly(tmp_path):
    assert mkdocs_build(REPO / "mkdocs.yml", tmp_path / "site") == []
    page = (tmp_path / "site" / "compatibility" / "index.html").read_text(encoding="utf-8")
    assert "<h1" in page and "Compatibility" in page
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="compatibility/"' in index
    assert (tmp_path / "site" / "compatibility.json").is_file()


def test_committed_table_files_carry_the_generated_header():
    page = (REPO / "docs" / "compatibility.md").read_text(encoding="utf-8")
    assert page.startswith(f"<!-- {HEADER} -->\n")
    data = (REPO / "docs" / "compatibility.json").read_text(encoding="utf-8")
    assert data.startswith('{\n  "generated": "' + HEADER.replace('"', '\\"') + '",')


def test_docs_with_evidence_links_build_strictly(facts, project, tmp_path):
    # the site source sits next to matrix/results, as in the repository
    (project / "mkdocs.yml").write_bytes((REPO / "mkdocs.yml").read_bytes())
    (project / "docs" / "index.md").write_bytes((REPO / "docs" / "index.md").read_bytes())
    table = build_table(facts, load(project / "matrix" / "results"))
    page = project / "docs" / "compatibility.md"
    page.write_text(render_markdown(table, page), encoding="utf-8")
    (project / "docs" / "compatibility.json").write_text(render_json(table, project))
    missing = mkdocs_build(project / "mkdocs.yml", tmp_path / "site")
    assert len(missing) == 4  # one evidence link per row with records
    for link in missing:
        assert link.startswith("../matrix/results/")
        assert (page.parent / link).resolve().is_file()
