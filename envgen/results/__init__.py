"""The results stage: what result records prove, and the compatibility table built from them.

Input: record files (verify records, schema 1, written by ``envgen verify``; attempt records,
attempt/1, written by ``envgen evidence``) and the facts. Output: the append-only store under
<data dir>/results/ (``store``), each combination's evidence tier and status (``tiers``,
``status``), and the table: Markdown page, JSON and README block (``table``).

Names are imported on first use (a command that reads one record does not load the table).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AttemptRecord": "attempt",
    "Problem": "record", "RecordError": "record", "ResultRecord": "record", "validate": "record",
    "CombinationStatus": "status", "status_of": "status", "statuses": "status",
    "AddOutcome": "store", "StoredRecord": "store", "add": "store", "load": "store",
    "Table": "table", "build_table": "table",
    "CombinationEvidence": "tiers", "evidence": "tiers", "evidence_of": "tiers",
}

__all__ = [
    "AddOutcome",
    "AttemptRecord",
    "CombinationEvidence",
    "CombinationStatus",
    "Problem",
    "RecordError",
    "ResultRecord",
    "StoredRecord",
    "Table",
    "add",
    "build_table",
    "evidence",
    "evidence_of",
    "load",
    "status_of",
    "statuses",
    "validate",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'envgen.results' has no attribute {name!r}")
    return getattr(importlib.import_module(f"envgen.results.{module}"), name)
