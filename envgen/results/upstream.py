"""Upstream evidence for the compatibility table: the citations of matrix/curated/upstream.toml.

The file is read and modelled by :mod:`envgen.facts.upstream` (the matrix loader owns every
file in matrix/); the names are re-exported here for the code that imported them from results.
"""

from __future__ import annotations

from envgen.facts.upstream import FILE, SCHEMA, Upstream, load_upstream, parse, upstream_for

__all__ = ["FILE", "SCHEMA", "Upstream", "load_upstream", "parse", "upstream_for"]
