"""What a graded submission's processes may not reach, sandbox or not: the grader's keyrings and the
memory of other processes (the judge's included).

- Every child joins a fresh anonymous session keyring before it executes anything (`keyctl
  KEYCTL_JOIN_SESSION_KEYRING`): the keyring the grader's login shell or service holds is not its.
- A seccomp filter denies (EPERM) the system calls container runtimes' default profiles deny for
  the same reasons: `add_key`, `keyctl`, `request_key` (no keyring at all, so none is read, revoked,
  or left behind for a later submission), `ptrace`, `process_vm_readv` and `process_vm_writev` (no
  other process's memory). The filter is built and compiled by libseccomp (Debian package
  `libseccomp2`, through its C API), which resolves the calls' numbers for this machine and rejects
  calls made in another architecture's convention; bubblewrap loads it (`--seccomp FD`), or, without
  bubblewrap, the child itself just before it executes (`no_new_privs` first, as the kernel requires).

Without libseccomp there is no filter: `missing()` says what does not hold then.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import platform

DENIED = ("add_key", "keyctl", "request_key", "ptrace", "process_vm_readv", "process_vm_writev")
"""The system calls no process of a submission may make (each fails with EPERM)."""

_ALLOW = 0x7FFF0000  # SCMP_ACT_ALLOW
_DENY = 0x00050000 | errno.EPERM  # SCMP_ACT_ERRNO(EPERM)
_KEYCTL_JOIN_SESSION_KEYRING = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_KEYCTL_NUMBERS = {"x86_64": 250, "i386": 288, "i686": 288, "aarch64": 219, "riscv64": 219, "armv7l": 311}
"""keyctl's system call number where libseccomp cannot say it (asm-generic's for arm64 and riscv64)."""


class _SockFprog(ctypes.Structure):
    """The kernel's `struct sock_fprog`: a BPF program's length in instructions and where it is."""

    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    return libc


@functools.lru_cache(maxsize=1)
def _libseccomp() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("seccomp")
    try:
        lib = ctypes.CDLL(name or "libseccomp.so.2", use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    return lib


@functools.lru_cache(maxsize=1)
def filter_program() -> bytes | None:
    """The compiled filter (classic BPF, as the kernel and `bwrap --seccomp` take it): DENIED fail with
    EPERM, every other call is allowed. None where libseccomp is not installed."""
    lib = _libseccomp()
    if lib is None:
        return None
    context = lib.seccomp_init(_ALLOW)
    if not context:
        return None
    try:
        for name in DENIED:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0 or lib.seccomp_rule_add(context, _DENY, number, 0) != 0:
                raise OSError(f"libseccomp could not add a rule for {name}")
        fd = os.memfd_create("course-seccomp", os.MFD_CLOEXEC)
        try:
            if lib.seccomp_export_bpf(context, fd) != 0:
                raise OSError("libseccomp could not export the filter")
            return os.pread(fd, 1 << 20, 0)
        finally:
            os.close(fd)
    finally:
        lib.seccomp_release(context)


def program_fd() -> int:
    """A new descriptor holding the filter, read from its start (`bwrap --seccomp FD` reads it to its
    end: one per sandbox started). The caller closes it once the child started."""
    program = filter_program()
    if program is None:
        raise OSError("libseccomp is not installed")
    fd = os.memfd_create("course-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@functools.lru_cache(maxsize=1)
def _keyctl_number() -> int | None:
    lib = _libseccomp()
    number = lib.seccomp_syscall_resolve_name(b"keyctl") if lib is not None else -1
    return number if number >= 0 else _KEYCTL_NUMBERS.get(platform.machine())


def prepare() -> None:
    """Load everything the child's `in_child` calls, here, before any fork: after a fork in a process
    with threads, the child should do no more than make system calls."""
    _libc(), _keyctl_number()
    if filter_program() is not None:
        _loaded_program()


@functools.lru_cache(maxsize=1)
def _loaded_program() -> tuple[ctypes.Array, _SockFprog]:
    program = filter_program()
    buffer = ctypes.create_string_buffer(program, len(program))
    return buffer, _SockFprog(len(program) // 8, ctypes.addressof(buffer))


def join_fresh_keyring() -> None:
    """In a child before it executes: leave the inherited session keyring for a new, empty, anonymous one.
    Where keyctl is refused to this process already (a container's own filter), it is to the child too."""
    number = _keyctl_number()
    if number is None:
        return  # (said by `missing`)
    if _libc().syscall(number, _KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        code = ctypes.get_errno()
        if code not in (errno.EPERM, errno.ENOSYS, errno.EACCES):
            raise OSError(code, "could not join a fresh session keyring")


def load_filter_here() -> None:
    """In a child before it executes (without bubblewrap): the filter holds for it and all it starts."""
    _, fprog = _loaded_program()
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0 or \
            libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "could not load the seccomp filter")


def missing() -> list[str]:
    """What of this module's protection this machine cannot give, in words (empty: all of it)."""
    gaps = []
    if filter_program() is None:
        gaps.append(f"no seccomp filter (libseccomp is not installed: apt-get install libseccomp2): a submission may "
                    f"call {', '.join(DENIED)}")
    if _keyctl_number() is None:
        gaps.append(f"no fresh session keyring: keyctl's number on {platform.machine()} is not known here")
    return gaps


_PR_SET_DUMPABLE = 4


def shield_judge() -> None:
    """Make this process's /proc files (environment, memory, open files) readable by root only: a
    submission graded without the sandbox as another user than root cannot read them (as root it
    can; its command line stays readable by all). Its children are readable again once they execute."""
    _libc().prctl(_PR_SET_DUMPABLE, 0, None, 0, 0)
