"""sha256 for the compile path, without loading OpenSSL.

``import hashlib`` loads OpenSSL's libcrypto (``_hashlib``) on every
interpreter start, a measurable share of a cold ``tutorrl compile``
(benchmarks/bench_compile.py) that hashes a few kilobytes. CPython's own
builtin sha256 -- the one hashlib itself falls back to where OpenSSL is
absent -- gives identical digests. Evidence hashing (gigabytes) keeps
hashlib's OpenSSL implementation.
"""

try:
    from _sha2 import sha256  # CPython >= 3.12
except ImportError:
    try:
        from _sha256 import sha256  # CPython 3.11
    except ImportError:  # another implementation
        from hashlib import sha256

__all__ = ["sha256"]
