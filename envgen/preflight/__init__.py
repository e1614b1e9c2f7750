"""``envgen preflight``: check every node of a multi-node job before it launches.

Modules: ``nodes`` (where the job's nodes come from: a DeepSpeed hostfile, ``--hosts``, Slurm's
or the launcher's variables), ``catalog`` (the finding kinds, their citations and thresholds),
``remote`` (running envgen's inside scripts on a node, over SSH or here), ``probe`` (one node's
facts and doctor snapshot), ``checks_*`` (the rules that turn facts into findings),
``collective`` (a real all_reduce across the nodes) and ``run`` (the checks in order, and the
report).
"""
