"""The evidence stage: T1 (locked) and T2 (built, ops compiled and loaded) evidence runs.

Input: facts, the image recipes and the cells to run (``cells``: the newest combination per
framework × torch CUDA minor in each lock flavor; per --build target for T2). Output: one
attempt record per cell, passed or failed, with the machine, the lock and build figures, the
first error line and the log digest (``run``; the records: matrix/results/README.md).
``envgen evidence`` / ``envgen.api.evidence`` store them.
"""
