"""YAML text of the lock files (environment.yml, conda-lock.yml): PyYAML emits it in block
style, keys in the order given. Input: mappings, sequences, strings, ints, bools and None.

Hand-written part (the quoting rule :func:`plain`), kept for byte-stable lock files: PyYAML's
own rule writes ``2.5.1`` plain and ``'3.10'`` single-quoted where envgen has always written
``"2.5.1"`` and ``"3.10"``, which would change the bytes of every lock file (and the file
hashes its manifest seals). Strings of ASCII letters, digits and ``_./$(:+=<>!,*~()@|-`` are
written plain unless a YAML reader would take them for a number, bool or null (a date-like
``2024-01-02`` stays plain, as it always was); the rest double-quoted. libyaml's emitter
(``CSafeDumper``) writes it when PyYAML has it, the pure-Python one otherwise: the same bytes
for the text lock files hold (they differ only on control characters, characters outside the
BMP and nested sequences, which lock files never contain). The tests pin the bytes.
"""

from __future__ import annotations

import functools
import re
from typing import Any

_PLAIN = re.compile(r"[A-Za-z0-9_./$(][A-Za-z0-9_ ./:+=<>!,*~()@$|-]*")
_NUMBERISH = re.compile(r"[-+]?(\.?\d[\d_.]*([eE][-+]?\d+)?|\.inf|\.nan|0[xob][\da-fA-F_]+)",
                        re.IGNORECASE)
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~", ""}
_STR = "tag:yaml.org,2002:str"


def plain(text: str) -> bool:
    """Whether ``text`` is written without quotes (the rule of the module docstring)."""
    return bool(_PLAIN.fullmatch(text) and not _NUMBERISH.fullmatch(text)
                and text.lower() not in _RESERVED and ": " not in text and " #" not in text
                and not text.endswith((" ", ":")))


def dumper(base: type | None = None) -> type:
    """A PyYAML Dumper class on ``base`` (default: libyaml's ``CSafeDumper`` when PyYAML has
    it, else ``SafeDumper``) writing strings by :func:`plain`."""
    import yaml  # here, not at start-up: only writing a lock needs it

    class Dumper(base or getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
            if kind is yaml.ScalarNode and implicit[0] and plain(value):
                return _STR  # plain: PyYAML's resolver would take "2024-01-02" for a date
            return super().resolve(kind, value, implicit)

    Dumper.add_representer(str, lambda d, text: d.represent_scalar(
        _STR, text, style=None if plain(text) else '"'))
    return Dumper


_lock_dumper = functools.cache(dumper)


def dump(value: Any) -> str:
    """``value`` as a YAML document (block style, ending with a newline)."""
    import yaml

    return yaml.dump(value, Dumper=_lock_dumper(), sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1 << 30)
