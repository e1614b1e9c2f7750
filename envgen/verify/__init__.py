"""The verify stage, envgen's side: checks of an installed env or a built image.

Input: the target (an interpreter here, or an image ``docker run`` starts), the framework and
the lock it was installed from. Output: ops.py's and smoke.py's results and a result record
(``record``). ``launch`` starts the checks in the target and collects what they wrote.

The checks themselves are envgen/inside's ``ops.py`` (each op compiled, loaded and checked
against a reference) and ``smoke.py`` (torchrun: collectives and engine steps): standalone
scripts that run in the target with the standard library, torch and the framework only.
envgen.api.verify wires these together.
"""
