"""The GPU CI matrix: which cells the self-hosted GPU runners verify next.

Input: the cells (matrix/cells.toml, read by envgen.facts.cells), each cell's lock
(<locks>/<id>/envgen.lock.json) and the result records. Output: the GitHub Actions matrix of
the cells whose lock hash has no result yet (``github``), with counts and a summary line;
``envgen matrix github`` prints it.
"""
