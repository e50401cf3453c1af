"""HostRoot: every read of the host goes through here, relative to a root.

The root is ``/`` on a host, ``/host`` in a container, or a fixture / captured
snapshot directory in tests. Reads are bounded (64 KiB), decoded safely, and a
broken file (permission denied, garbage bytes, a dangling link, a directory
where a file belongs) becomes a warning, never an exception.

Performance matters: a node can have thousands of PCI functions, so this module
uses ``os.open``/``os.read`` on plain strings instead of :mod:`pathlib`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

MAX_READ = 64 * 1024

# O_NONBLOCK: a FIFO planted in a tree must not hang the scan (no effect on regular files).
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class HostRoot:
    """Safe, bounded, root-relative reads. Collects warnings instead of raising."""

    __slots__ = ("_recorder", "root", "warnings")

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        path = os.fspath(root)
        self.root = path.rstrip("/") or "/"
        self.warnings: list[str] = []
        self._recorder: Callable[[str], None] | None = None

    def __repr__(self) -> str:
        return f"HostRoot({self.root!r})"

    def set_recorder(self, recorder: Callable[[str], None] | None) -> None:
        """Call ``recorder(rel)`` for every path read, listed, readlink'd or tested
        (``exists`` / ``is_dir``); used by ``nfd-gpu snapshot``."""
        self._recorder = recorder

    def path(self, rel: str) -> str:
        """Absolute path of ``rel`` (a path relative to the root, no leading ``/``)."""
        rel = rel.lstrip("/")
        if self.root == "/":
            return "/" + rel
        return self.root + "/" + rel

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def _display(self, rel: str) -> str:
        return "/" + rel.lstrip("/")

    def read_bytes(self, rel: str, *, optional: bool = True, limit: int = MAX_READ) -> bytes | None:
        """Read at most ``limit`` bytes (64 KiB). ``None`` when the file cannot be read.

        A missing file is silent when ``optional``; every other failure (and a
        missing required file) is recorded as a warning. A longer file is cut to
        ``limit`` bytes with a warning.
        """
        if self._recorder is not None:
            self._recorder(rel)
        p = self.path(rel)
        try:
            fd = os.open(p, _FLAGS)
        except FileNotFoundError:
            if os.path.islink(p):
                self.warn(f"{self._display(rel)}: dangling symbolic link")
            elif not optional:
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
                self.warn(f"{self._display(rel)}: cannot open ({exc.strerror})")
            return None
        try:
            data = os.read(fd, limit + 1)
        except IsADirectoryError:
            self.warn(f"{self._display(rel)}: is a directory, expected a file")
            return None
        except OSError as exc:
            # sysfs returns EIO/ENODEV/EINVAL for attributes the device cannot report.
            if not optional or exc.errno not in (errno.EIO, errno.ENODEV, errno.EINVAL):
                self.warn(f"{self._display(rel)}: read error ({exc.strerror})")
            return None
        finally:
            os.close(fd)
        if len(data) > limit:
            self.warn(f"{self._display(rel)}: larger than {limit} bytes, truncated")
            data = data[:limit]
        return data

    def read_at(self, rel: str, offset: int, size: int) -> bytes | None:
        """Up to ``size`` bytes at ``offset`` (``pread``; at most 4 KiB), ``b""`` past the end,
        None when the file cannot be opened or read. For files where every byte read costs
        (PCI config space: each access traps to the hypervisor in a VM)."""
        if self._recorder is not None:
            self._recorder(rel)
        try:
            fd = os.open(self.path(rel), _FLAGS)
        except OSError:
            return None
        try:
            return os.pread(fd, max(0, min(size, 4096)), max(0, offset))
        except OSError:
            return None
        finally:
            os.close(fd)

    def read_text(self, rel: str, *, optional: bool = True) -> str | None:
        """Read a text attribute: decoded (invalid UTF-8 replaced), NULs removed, stripped."""
        data = self.read_bytes(rel, optional=optional)
        if data is None:
            return None
        text = data.decode("utf-8", "replace").replace("\x00", "")
        return text.strip()

    def read_int(self, rel: str, *, base: int = 10, optional: bool = True) -> int | None:
        """Read an integer attribute (``base=0`` accepts ``0x`` prefixes)."""
        text = self.read_text(rel, optional=optional)
        if text is None or text == "":
            return None
        try:
            return int(text.split()[0], base)
        except ValueError:
            self.warn(f"{self._display(rel)}: not an integer: {_preview(text)}")
            return None

    def readlink_name(self, rel: str) -> str | None:
        """Basename of a symbolic link's target (``driver``, ``iommu_group``, ...)."""
        if self._recorder is not None:
            self._recorder(rel)
        try:
            target = os.readlink(self.path(rel))
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # exists but is not a link
                self.warn(f"{self._display(rel)}: expected a symbolic link")
            elif exc.errno != errno.ENOTDIR:
                self.warn(f"{self._display(rel)}: cannot read link ({exc.strerror})")
            return None
        name = os.path.basename(target.rstrip("/"))
        return name or None

    def listdir(self, rel: str) -> list[str]:
        """Sorted names in a directory; ``[]`` when it is missing or unreadable."""
        if self._recorder is not None:
            self._recorder(rel)
        try:
            return sorted(os.listdir(self.path(rel)))
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            self.warn(f"{self._display(rel)}: expected a directory")
            return []
        except OSError as exc:
            self.warn(f"{self._display(rel)}: cannot list ({exc.strerror})")
            return []

    def exists(self, rel: str) -> bool:
        if self._recorder is not None:
            self._recorder(rel)
        return os.path.exists(self.path(rel))

    def is_dir(self, rel: str) -> bool:
        if self._recorder is not None:
            self._recorder(rel)
        return os.path.isdir(self.path(rel))

    def stat(self, rel: str) -> os.stat_result | None:
        """``os.stat`` (following links) or None; recorded like every other access."""
        if self._recorder is not None:
            self._recorder(rel)
        try:
            return os.stat(self.path(rel))
        except OSError:
            return None


def _preview(text: str, limit: int = 40) -> str:
    """A short, single-line, printable preview of bad content for a warning."""
    one = "".join(ch if ch.isprintable() else "?" for ch in text[:limit])
    return repr(one + ("..." if len(text) > limit else ""))
