"""``envgen preflight``: check every node of a multi-node job before it launches.

Modules: ``nodes`` (where the job's nodes come from: a DeepSpeed hostfile, ``--hosts``, Slurm's
or the launcher's variables, and the consistency of the launcher variables). The checks that
use them (SSH, the same environment on every node, interfaces, the master port, a real
collective) are issue 17's remaining work.
"""
