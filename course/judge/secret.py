"""The grading secret (`course grade --seed TEXT` or `--seed-file FILE`) and what is drawn from it.

The secret is bytes. Each use of it gets a key of its own, HMAC-SHA256 of the secret with the use's
names (`derive(secret, "plans", module, section)`): a submission sees the plans it runs, and from
them at best the key of their section, which tells nothing about the secret or about any other
section's key. What it could still do is guess the secret itself and draw the plans again for each
guess (a few milliseconds a guess): a short secret (`--seed 1234`) is found in seconds. Hence at
least 128 bits, and a warning below that.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import string
from pathlib import Path

MIN_BITS = 128
"""Bits a grading secret should hold at least: more than any search can try."""
MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_hex(16))'"
"""A command that prints a secret of 128 bits."""
_BASE64 = string.ascii_letters + string.digits + "+/=-_"


def as_secret(seed: str | bytes | int) -> bytes:
    """A secret as bytes: text as its UTF-8, a number as its decimal text (`--seed 7` is seed=7)."""
    if isinstance(seed, bytes):
        return seed
    return str(seed).encode("utf-8", "surrogateescape")


def derive(secret: str | bytes | int, *names: str) -> bytes:
    """The key of one use of the secret: HMAC-SHA256 of the secret with the names (NUL between them)."""
    return hmac.new(as_secret(secret), "\0".join(names).encode("utf-8", "surrogateescape"), hashlib.sha256).digest()


def strength(secret: bytes) -> float:
    """The bits the secret holds at the most, by the smallest alphabet that writes it (digits, hex,
    base64, printable text, bytes): `1234` holds 13, 32 hex digits 128."""
    try:
        text = secret.decode("ascii")
    except UnicodeDecodeError:
        return 8.0 * len(secret)
    for alphabet, bits in ((string.digits, math.log2(10)), (string.hexdigits, 4.0), (_BASE64, 6.0),
                           (string.printable, math.log2(len(string.printable)))):
        if all(character in alphabet for character in text):
            return bits * len(text)
    return 8.0 * len(secret)


def read(seed: str | None, seed_file: str | None) -> bytes | None:
    """The secret given on the command line or in a file (its end of line left out); None when neither.
    Raises ValueError (its message for the user) for both, an empty one or a file it cannot read."""
    if seed is not None and seed_file is not None:
        raise ValueError("give the secret once: --seed TEXT or --seed-file FILE, not both")
    if seed_file is not None:
        try:
            secret = Path(seed_file).read_bytes().rstrip(b"\r\n")
        except OSError as error:
            raise ValueError(f"--seed-file {seed_file}: {error.strerror}") from None
    elif seed is not None:
        secret = as_secret(seed)
    else:
        return None
    if not secret:
        raise ValueError("the secret is empty: " + MAKE_ONE + " prints one of 128 bits")
    return secret


def warning(secret: bytes, on_command_line: bool) -> str | None:
    """What to tell the grader about this secret, or None: a secret of fewer than MIN_BITS bits can be
    searched for from the plans a submission sees."""
    bits = strength(secret)
    if bits >= MIN_BITS:
        return None
    where = " (kept in a file, for --seed-file, it is not on the command line either)" if on_command_line else ""
    return (f"the secret holds {bits:.0f} bits at the most: a submission that sees its plans can find it by drawing "
            f"plans for every guess (`--seed 1234` took seconds). Use {MIN_BITS} bits or more, e.g. {MAKE_ONE}{where}")
