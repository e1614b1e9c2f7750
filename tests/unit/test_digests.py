"""envgen.digests: SHA-256 by CPython's own code for small inputs, OpenSSL's for many bytes."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from envgen.digests import Hasher, small_sha256


def test_the_digests_are_sha256s():
    for data in (b"", b"abc", bytes(range(256)) * 1000):
        assert small_sha256(data).digest() == hashlib.sha256(data).digest()
    h = small_sha256(b"ab")
    h.update(b"c")
    assert h.hexdigest() == hashlib.sha256(b"abc").hexdigest()


def test_the_hasher_switches_to_openssl_past_its_threshold_with_the_same_digests():
    hasher = Hasher(switch=10)
    inputs = [b"record-%d" % i for i in range(5)]
    assert [hasher.digest(d) for d in inputs] == [hashlib.sha256(d).digest() for d in inputs]
    assert hasher.switch == -1 and hasher._sha256 is hashlib.sha256


def test_small_inputs_do_not_import_hashlib():
    code = ("import sys\nfrom envgen.digests import Hasher, small_sha256\n"
            "small_sha256(b'key').hexdigest()\n"
            "h = Hasher()\n[h.digest(b'x' * 2000) for _ in range(100)]\n"
            "print('hashlib' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
