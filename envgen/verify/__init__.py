"""Verification that runs inside a built env or image: ``ops.py`` (each op compiled, loaded
and checked against a reference) and ``smoke.py`` (torchrun: collectives and engine steps).
Both are standalone scripts (standard library, torch and the framework only); ``launch`` and
``record`` are envgen's side: start them, collect their output, write a result record."""
