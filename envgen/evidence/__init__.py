"""Evidence runs: lock (T1) and build (T2) combinations and record every attempt
(``envgen evidence``; the records: matrix/results/README.md)."""
