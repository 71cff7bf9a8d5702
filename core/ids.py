"""Random identifiers in the UUID version 4 text form, minted cheaply.

`uuid.uuid4()` makes a system call and two objects per id; here 16 KiB of randomness from the
OS is drawn at a time and formatted directly. The ids are as unpredictable as uuid4's (both use
os.urandom) and have the same form, version and variant bits.
"""

from __future__ import annotations

import os

_POOL_IDS = 1024
_pool = b""
_next = 0


def new_id() -> str:
    """A fresh random id such as `3f2b1c9e-6d4a-4e8f-9b7a-0c1d2e3f4a5b`."""
    global _pool, _next
    if _next >= len(_pool):
        _pool = os.urandom(16 * _POOL_IDS)
        _next = 0
    raw = bytearray(_pool[_next : _next + 16])
    _next += 16
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
