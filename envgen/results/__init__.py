"""Verification results: the record schema, the append-only store under matrix/results/, the
status derived from records, and the compatibility table generated from them."""

from envgen.results.record import Problem, RecordError, ResultRecord, validate
from envgen.results.status import CombinationStatus, status_of, statuses
from envgen.results.store import AddOutcome, StoredRecord, add, load
from envgen.results.table import Table, build_table

__all__ = [
    "AddOutcome",
    "CombinationStatus",
    "Problem",
    "RecordError",
    "ResultRecord",
    "StoredRecord",
    "Table",
    "add",
    "build_table",
    "load",
    "status_of",
    "statuses",
    "validate",
]
