"""The kernel's keyrings through libc's `syscall`, for the grading tests: the test holds a key of its own,
and hostile submissions carry this file's text to read, revoke and leave keys (see test_grade_hostile).

Every function answers the kernel's result: a key's serial or a count (>= 0), or minus the errno."""

import ctypes
import platform

SESSION, USER, USER_SESSION = -3, -4, -5
"""The special keyrings a process reaches by these numbers: its session keyring, its user's, its user's session's."""
KEYRINGS = (SESSION, USER, USER_SESSION)
_NUMBERS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219), "riscv64": (217, 218, 219)}
_ADD_KEY, _REQUEST_KEY, _KEYCTL = _NUMBERS.get(platform.machine(), (-1, -1, -1))
_REVOKE, _UNLINK, _SEARCH, _READ = 3, 9, 10, 11
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _call(*args) -> int:
    words = [ctypes.c_long(arg) if isinstance(arg, int) else arg for arg in args]
    answer = _libc.syscall(*words)
    return answer if answer >= 0 else -ctypes.get_errno()


def known() -> bool:
    """Whether this machine's keyctl number is known here."""
    return _KEYCTL > 0


def add_key(description: str, payload: bytes, keyring: int) -> int:
    return _call(_ADD_KEY, b"user", description.encode(), payload, len(payload), keyring)


def search(description: str, keyring: int) -> int:
    return _call(_KEYCTL, _SEARCH, keyring, b"user", description.encode(), 0)


def read(key: int) -> bytes | int:
    buffer = ctypes.create_string_buffer(1 << 16)
    size = _call(_KEYCTL, _READ, key, buffer, 1 << 16)
    return buffer.raw[:size] if size >= 0 else size


def revoke(key: int) -> int:
    return _call(_KEYCTL, _REVOKE, key)


def unlink(key: int, keyring: int) -> int:
    return _call(_KEYCTL, _UNLINK, key, keyring)


def find(description: str) -> list[int]:
    """The keys of that description this process reaches in any of its keyrings."""
    return [key for key in (search(description, keyring) for keyring in KEYRINGS) if key > 0]
