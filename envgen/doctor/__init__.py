"""The doctor stage: judge one environment with the resolver's facts and rules.

Input: a snapshot of the environment (``snapshot``: collected live, saved as JSON, written by
hand or read from a pasted report; every field optional, absent meaning unknown). Output: the
snapshot as a typed, checked value; the findings and the facts it still needs build on it
(issue 16 brings the collection, the report parsers and the rules).
"""
