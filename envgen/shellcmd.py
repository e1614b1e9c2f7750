"""Commands that envgen prints for a user to paste into a shell (a finding's ``run`` line, a
fix, a hint): every word quoted with :func:`shlex.quote`, so a value from a file, a node or a
report (a host name, an address, a path) is one word and never shell code. Safe words
(``node01``, ``10.0.0.1``, ``/opt/env``) stay bare, so honest commands read as before.

Quoting makes a command safe to run, not safe to print: a control character stays inside the
quotes. The printers escape those (:func:`envgen.validate.shown`) when they write the text.
"""

from __future__ import annotations

import shlex

__all__ = ["command", "ssh"]


def command(*argv: object) -> str:
    """``argv`` as one shell command line, each word quoted where it needs to be."""
    return " ".join(shlex.quote(str(word)) for word in argv)


def ssh(node: str, *argv: object, options: tuple[str, ...] = ()) -> str:
    """``ssh [OPTIONS] NODE ARGV…`` as a command line. ssh hands the words after the node to the
    remote shell as one string, which that shell parses again, so each of them is quoted twice:
    the remote shell gets every word of ``argv`` as it is (``ssh n1 getent hosts
    ''"'"'$(x)'"'"''`` looks up the name ``$(x)``). ``node`` must be a host name that has been
    validated (:func:`envgen.preflight.hostlist.host_name`): a leading ``-`` would be an option
    of ssh, quoted or not."""
    return command("ssh", *options, node, *(shlex.quote(str(word)) for word in argv))
