"""Result records and what they prove: the two record kinds (verify records, schema 1; attempt
records, attempt/1), the append-only store under matrix/results/, the evidence tiers and
status derived from records, and the compatibility table generated from them."""

from envgen.results.attempt import AttemptRecord
from envgen.results.record import Problem, RecordError, ResultRecord, validate
from envgen.results.status import CombinationStatus, status_of, statuses
from envgen.results.store import AddOutcome, StoredRecord, add, load
from envgen.results.table import Table, build_table
from envgen.results.tiers import CombinationEvidence, evidence, evidence_of

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
