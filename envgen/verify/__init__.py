"""Verify an installed env or a built image, envgen's side: ``launch`` starts the checks in
the target (an interpreter here, or ``docker run`` of the image) and collects what they wrote;
``record`` turns that into a result record.

The checks themselves are envgen/inside's ``ops.py`` (each op compiled, loaded and checked
against a reference) and ``smoke.py`` (torchrun: collectives and engine steps): standalone
scripts that run in the target with the standard library, torch and the framework only.
envgen.api.verify wires these together.
"""
