"""HostRoot: every read of the host goes through here, relative to a root.

The root is ``/`` on a host and ``/host`` in a container.
In tests it is a fixture or a captured snapshot directory.

Reads:

- They are bounded to 64 KiB and decoded safely.
- A broken file becomes a warning, never an exception. Broken means: permission denied,
  garbage bytes, a dangling link, a directory where a file belongs.
- Only regular files are read and only directories listed.
- A device node, FIFO or socket planted where an attribute file belongs is opened
  non-blocking, never as a controlling terminal. ``fstat`` finds it is no regular file.
  It is closed unread, with a warning.

**Confinement.** Below a root other than ``/``, every path is resolved *inside* the root.
It is as if the process were chrooted there:

- An absolute symbolic link such as ``/etc/shadow`` is re-rooted to ``<root>/etc/shadow``.
- ``..`` never climbs above the root.
- So no link planted in a tree can make the scan read a file of the machine running it.
- The kernel's own sysfs links are relative and stay inside ``/sys``. They resolve as before.
- Linux >= 5.6 does this in one ``openat2(RESOLVE_IN_ROOT)`` call per open, with no extra
  system calls.
- Where that call is missing or refused by seccomp, the same resolution runs here.
  It goes component by component, with the links cached per instance.

**Errors versus warnings.**

- A damaged host file is a *warning*: the scan still describes the host.
- Some failures say nothing about the host: running out of resources, or a directory
  listing that fails. The resources are ``EMFILE``, ``ENFILE``, ``ENOMEM`` and ``ENOBUFS``.
- Such a scan is *incomplete*. Its failures go to ``errors``, and to ``warnings`` too.
- The agent then keeps the last good publication instead of publishing a partial label set.

Performance matters: a node can have thousands of PCI functions.
So this module uses ``os.open`` and ``os.read`` on plain strings instead of :mod:`pathlib`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat as stat_mod
from collections.abc import Callable
from typing import Any

from nfd_gpu.host.boundedfile import kind

MAX_READ = 64 * 1024

# O_NONBLOCK: a FIFO planted in a tree must not hang the scan (no effect on regular files);
# O_NOCTTY: a terminal planted there never becomes the controlling one. What is opened is
# then fstat'ed (_regular): only a regular file is read.
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_O_PATH = getattr(os, "O_PATH", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

# errnos that describe this process or machine, not the host tree: the scan is incomplete.
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
# symbolic links followed while resolving one path (the kernel's MAXSYMLINKS).
MAX_LINKS = 40


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _Openat2:
    """Call ``openat2(dirfd, path, {flags, resolve=RESOLVE_IN_ROOT})`` through libc's ``syscall``.

    ``usable`` turns False for good the first time the kernel or a seccomp filter refuses it.
    """

    NR = 437  # the same number on every architecture (asm-generic unified table)
    RESOLVE_IN_ROOT = 0x10
    RETRIES = 16  # EAGAIN: a rename or mount elsewhere raced the ".." walk

    def __init__(self) -> None:
        self.usable = False
        self._syscall: Any = None
        if not hasattr(os, "O_PATH"):  # not Linux
            return
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.syscall
        except (OSError, AttributeError):
            return
        fn.restype = ctypes.c_long
        self._syscall = fn
        self.usable = True
        self._how: dict[int, Any] = {}

    def open(self, dirfd: int, rel: str, flags: int) -> int:
        """Return an fd, or raise OSError; raise _Unsupported when openat2 cannot be used."""
        how = self._how.get(flags)
        if how is None:
            how = self._how[flags] = ctypes.byref(_OpenHow(flags, 0, self.RESOLVE_IN_ROOT))
        path = rel.encode() if rel else b"."
        fd: int = self._syscall(self.NR, dirfd, path, how, 24)
        if fd >= 0:
            return fd
        return self._failed(dirfd, path, how, rel)

    def _failed(self, dirfd: int, path: bytes, how: Any, rel: str) -> int:
        for _ in range(self.RETRIES):
            err = ctypes.get_errno()
            if err != errno.EAGAIN:
                break
            fd: int = self._syscall(self.NR, dirfd, path, how, 24)
            if fd >= 0:
                return fd
        else:
            raise _Unsupported  # persistent races: the portable resolver has none
        if err in (errno.ENOSYS, errno.EPERM, errno.E2BIG) or (err == errno.EINVAL and rel):
            # no openat2 / blocked by seccomp / no RESOLVE_IN_ROOT: resolve here
            self.usable = False
            raise _Unsupported
        raise OSError(err, os.strerror(err), rel)


_OPENAT2 = _Openat2()


class _Unsupported(Exception):
    pass


class HostRoot:
    """Safe, bounded, root-relative reads. Collects warnings instead of raising."""

    __slots__ = ("_dirfd", "_links", "_parent", "_recorder", "errors", "root", "warnings")

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        path = os.fspath(root)
        self.root = path.rstrip("/") or "/"
        self.warnings: list[str] = []
        # failures that make the scan incomplete (see the module docstring)
        self.errors: list[str] = []
        self._recorder: Callable[[str], None] | None = None
        self._dirfd = -1  # O_PATH fd of the root (confined mode), opened on first use
        self._links: dict[str, str | None] = {}  # portable resolver: readlink cache
        self._parent: tuple[str, int] | None = None  # last parent dir fd for readlink

    def __repr__(self) -> str:
        return f"HostRoot({self.root!r})"

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # also at interpreter shutdown
            self.close()

    def close(self) -> None:
        """Close the descriptors held for confinement; garbage collection does it too."""
        if self._parent is not None:
            os.close(self._parent[1])
            self._parent = None
        if self._dirfd >= 0:
            os.close(self._dirfd)
            self._dirfd = -1

    def set_recorder(self, recorder: Callable[[str], None] | None) -> None:
        """Call ``recorder(rel)`` for every path read, listed, readlink'd or tested.

        Tested means ``exists`` or ``is_dir``. ``nfd-gpu snapshot`` uses it.
        """
        self._recorder = recorder

    def path(self, rel: str) -> str:
        """Return the absolute path of ``rel``, *not* confined.

        - ``rel`` is relative to the root, with no leading ``/``.
        - For messages and for the snapshot copier only. Reads go through the methods below.
        """
        rel = rel.lstrip("/")
        if self.root == "/":
            return "/" + rel
        return self.root + "/" + rel

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def error(self, message: str) -> None:
        """Record a failure that makes the scan incomplete; it is listed as a warning too."""
        self.errors.append(message)
        self.warnings.append(message)

    def _display(self, rel: str) -> str:
        return "/" + rel.lstrip("/")

    # -- confined resolution ------------------------------------------------------------

    def _open(self, rel: str, flags: int) -> int:
        """Open ``rel`` resolved inside the root; raises OSError like ``os.open``."""
        rel = rel.strip("/")
        if self.root == "/":
            return os.open("/" + rel, flags)
        if self._dirfd < 0:
            self._dirfd = os.open(self.root, _O_PATH | _O_DIRECTORY | _O_CLOEXEC)
        if _OPENAT2.usable:
            try:
                return _OPENAT2.open(self._dirfd, rel, flags)
            except _Unsupported:
                pass
        real = self.resolve(rel, follow=not flags & _O_NOFOLLOW)
        # the last component was resolved: a link appearing there now is refused
        return os.open(real or ".", flags | _O_NOFOLLOW, dir_fd=self._dirfd)

    def _readlink_raw(self, rel: str) -> str | None:
        """Return the target of the link at ``rel``, or None if no link.

        The caller resolves the parent.
        """
        if rel in self._links:
            return self._links[rel]
        try:
            target: str | None = os.readlink(rel, dir_fd=self._dirfd)
        except OSError:
            target = None
        self._links[rel] = target
        return target

    def resolve(self, rel: str, *, follow: bool = True) -> str:
        """Return ``rel`` with every symbolic link resolved inside the root.

        - This is the portable resolver.
        - The result has no leading ``/``; it is ``""`` for the root itself.
        - Raises OSError(ELOOP) after MAX_LINKS links.
        """
        if self._dirfd < 0:
            self._dirfd = os.open(self.root, _O_PATH | _O_DIRECTORY | _O_CLOEXEC)
        pending = rel.split("/")
        pending.reverse()
        cur: list[str] = []
        links = 0
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if cur:
                    cur.pop()
                continue
            cur.append(name)
            if not follow and not any(p not in ("", ".") for p in pending):
                break
            target = self._readlink_raw("/".join(cur))
            if target is None:
                continue
            cur.pop()
            links += 1
            if links > MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel)
            if target.startswith("/"):
                cur = []  # re-rooted: absolute links start at the root, not at "/"
            parts = target.split("/")
            parts.reverse()
            pending.extend(parts)
        return "/".join(cur)

    def _oserror(self, rel: str, exc: OSError, what: str) -> None:
        msg = f"{self._display(rel)}: {what} ({exc.strerror})"
        if exc.errno in RESOURCE_ERRNOS:
            self.error(msg)
        else:
            self.warn(msg)

    # -- reads ----------------------------------------------------------------------------

    def read_bytes(
        self, rel: str, *, optional: bool = True, limit: int = MAX_READ, record: bool = True
    ) -> bytes | None:
        """Read at most ``limit`` bytes, 64 KiB by default; None when the file cannot be read.

        - A missing file is silent when ``optional``.
        - Every other failure is recorded as a warning, a missing required file included.
        - ``record=False`` hides the read from the snapshot recorder.
        """
        if record and self._recorder is not None:
            self._recorder(rel)
        try:
            try:
                # the last component is rarely a link: O_NOFOLLOW tells a missing file
                # (ENOENT) from a link (ELOOP) without another system call
                fd = self._open(rel, _FLAGS | _O_NOFOLLOW)
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                try:
                    fd = self._open(rel, _FLAGS)
                except FileNotFoundError:
                    self.warn(f"{self._display(rel)}: dangling symbolic link")
                    return None
        except FileNotFoundError:
            if not optional:
                self.warn(f"{self._display(rel)}: missing")
            return None
        except NotADirectoryError:
            self.warn(f"{self._display(rel)}: a parent path is not a directory")
            return None
        except PermissionError:
            self.warn(f"{self._display(rel)}: permission denied")
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.warn(f"{self._display(rel)}: symbolic link loop")
            else:
                self._oserror(rel, exc, "cannot open")
            return None
        try:
            if not self._regular(rel, fd):
                return None
            if limit <= MAX_READ:
                data = os.read(fd, limit + 1)
            else:
                chunks: list[bytes] = []
                size = 0
                while size <= limit:
                    chunk = os.read(fd, min(1 << 20, limit + 1 - size))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                data = b"".join(chunks)
        except OSError as exc:
            # sysfs returns EIO/ENODEV/EINVAL for attributes the device cannot report.
            if exc.errno in RESOURCE_ERRNOS:
                self._oserror(rel, exc, "read error")
            elif not optional or exc.errno not in (errno.EIO, errno.ENODEV, errno.EINVAL):
                self.warn(f"{self._display(rel)}: read error ({exc.strerror})")
            return None
        finally:
            os.close(fd)
        if len(data) > limit:
            self.warn(f"{self._display(rel)}: larger than {limit} bytes, truncated")
            data = data[:limit]
        return data

    def read_at(self, rel: str, offset: int, size: int) -> bytes | None:
        """Read up to ``size`` bytes at ``offset`` with ``pread``, at most 4 KiB.

        - Return ``b""`` past the end.
        - Return None when the file cannot be opened or read.
        - For files where every byte read costs. Example: PCI config space, where each access
          traps to the hypervisor in a VM.
        """
        if self._recorder is not None:
            self._recorder(rel)
        try:
            fd = self._open(rel, _FLAGS)
        except OSError as exc:
            if exc.errno in RESOURCE_ERRNOS:
                self._oserror(rel, exc, "cannot open")
            return None
        try:
            if not self._regular(rel, fd):
                return None
            return os.pread(fd, max(0, min(size, 4096)), max(0, offset))
        except OSError:
            return None
        finally:
            os.close(fd)

    def _regular(self, rel: str, fd: int) -> bool:
        """Tell whether the open ``fd`` is a regular file.

        Anything else is a warning and is never read: a device node, a FIFO, or a socket
        planted as an attribute file.
        """
        mode = os.fstat(fd).st_mode
        if stat_mod.S_ISREG(mode):
            return True
        if stat_mod.S_ISDIR(mode):
            self.warn(f"{self._display(rel)}: is a directory, expected a file")
        else:
            self.warn(f"{self._display(rel)}: not a regular file ({kind(mode)}), not read")
        return False

    def read_text(self, rel: str, *, optional: bool = True) -> str | None:
        """Read a text attribute: decoded with invalid UTF-8 replaced, NULs removed, stripped."""
        data = self.read_bytes(rel, optional=optional)
        if data is None:
            return None
        text = data.decode("utf-8", "replace").replace("\x00", "")
        return text.strip()

    def read_int(self, rel: str, *, base: int = 10, optional: bool = True) -> int | None:
        """Read an integer attribute; ``base=0`` accepts ``0x`` prefixes."""
        text = self.read_text(rel, optional=optional)
        if text is None or text == "":
            return None
        try:
            return int(text.split()[0], base)
        except ValueError:
            self.warn(f"{self._display(rel)}: not an integer: {_preview(text)}")
            return None

    def _readlink(self, rel: str) -> str:
        """Call ``os.readlink`` on the last component of ``rel``; its parents are confined."""
        rel = rel.strip("/")
        if self.root == "/":
            return os.readlink("/" + rel)
        parent, _, name = rel.rpartition("/")
        if self._parent is not None and self._parent[0] == parent:
            pfd = self._parent[1]
        else:
            pfd = self._open(parent, _O_PATH | _O_DIRECTORY | _O_CLOEXEC)
            if self._parent is not None:
                os.close(self._parent[1])
            self._parent = (parent, pfd)
        return os.readlink(name, dir_fd=pfd)

    def readlink(self, rel: str) -> str | None:
        """Return the target of the symbolic link at ``rel``.

        - Its parents are resolved inside the root.
        - None when it is no link or cannot be read.
        - Not recorded: these are the snapshot copier's own reads.
        """
        try:
            return self._readlink(rel)
        except OSError:
            return None

    def lstat(self, rel: str) -> os.stat_result | None:
        """Call ``os.lstat`` inside the root, the last component not followed, or return None.

        Not recorded: these are the snapshot copier's own reads.
        """
        try:
            fd = self._open(rel, _O_PATH | _O_NOFOLLOW | _O_CLOEXEC)
        except OSError:
            return None
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)

    def readlink_name(self, rel: str) -> str | None:
        """Return the basename of a symbolic link's target: ``driver``, ``iommu_group``, ..."""
        if self._recorder is not None:
            self._recorder(rel)
        try:
            target = self._readlink(rel)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # exists but is not a link
                self.warn(f"{self._display(rel)}: expected a symbolic link")
            elif exc.errno != errno.ENOTDIR:
                self._oserror(rel, exc, "cannot read link")
            return None
        name = os.path.basename(target.rstrip("/"))
        return name or None

    def listdir(self, rel: str) -> list[str]:
        """Return the sorted names in a directory; ``[]`` when it is missing.

        A directory that exists but cannot be listed makes the scan incomplete: ``errors``.
        An empty list would look like "no devices".
        """
        if self._recorder is not None:
            self._recorder(rel)
        try:
            fd = self._open(rel, _FLAGS | _O_DIRECTORY)
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            self.warn(f"{self._display(rel)}: expected a directory")
            return []
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.warn(f"{self._display(rel)}: symbolic link loop")
            else:
                self.error(f"{self._display(rel)}: cannot list ({exc.strerror})")
            return []
        try:
            return sorted(os.listdir(fd))
        except OSError as exc:
            self.error(f"{self._display(rel)}: cannot list ({exc.strerror})")
            return []
        finally:
            os.close(fd)

    def stat(self, rel: str) -> os.stat_result | None:
        """Call ``os.stat`` inside the root, following links, or return None.

        Recorded like every other access.
        """
        if self._recorder is not None:
            self._recorder(rel)
        return self._stat(rel)

    def _stat(self, rel: str) -> os.stat_result | None:
        try:
            fd = self._open(rel, _O_PATH | _O_CLOEXEC)
        except OSError as exc:
            if exc.errno in RESOURCE_ERRNOS:
                self._oserror(rel, exc, "cannot open")
            return None
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)

    def exists(self, rel: str) -> bool:
        if self._recorder is not None:
            self._recorder(rel)
        return self._stat(rel) is not None

    def lexists(self, rel: str) -> bool:
        """Tell whether ``rel`` exists, a dangling symbolic link included; it is not followed."""
        if self._recorder is not None:
            self._recorder(rel)
        try:
            fd = self._open(rel, _O_PATH | _O_NOFOLLOW | _O_CLOEXEC)
        except OSError:
            return False
        os.close(fd)
        return True

    def is_dir(self, rel: str) -> bool:
        if self._recorder is not None:
            self._recorder(rel)
        st = self._stat(rel)
        return st is not None and stat_mod.S_ISDIR(st.st_mode)


def _preview(text: str, limit: int = 40) -> str:
    """A short, single-line, printable preview of bad content for a warning."""
    one = "".join(ch if ch.isprintable() else "?" for ch in text[:limit])
    return repr(one + ("..." if len(text) > limit else ""))
