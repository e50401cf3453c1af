"""Read one input file the operator names: the one bounded reader.

Files read here, never with a bare ``open()``:

- every file given to nfd-gpu by path: the configuration file, the sharing config,
  rule files, a NodeFeature document for ``rules test``, an NVML recording,
  the service account's namespace file;
- the feature file read back, capped at NFD's 65,536 bytes.

How:

* Opened non-blocking and never as a controlling terminal: ``O_NONBLOCK | O_NOCTTY``.
  So a FIFO, a socket or a terminal given as a path cannot hang the process.
* ``fstat`` runs on the open descriptor before any read. Only a regular file is read.
  A FIFO, a device node, a socket or a directory is refused, nothing read from it.
  So what is checked is what is read.
* A file larger than ``limit`` by ``st_size`` is refused without reading.
* Never more than ``limit`` + 1 bytes are read. A file that grows while read is refused too.

Symbolic links are followed: a ConfigMap mounted in a pod is a tree of links,
such as ``config.yaml -> ..data/config.yaml``.
``follow=False`` refuses one. The agent uses it for its own feature file, read back to see
whether it is still what was written.

Errors are :class:`FileReadError`, whose text is one line naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

# A ConfigMap holds at most 1 MiB: a configuration file larger than that is not one.
CONFIG_MAX = 1024 * 1024

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


class FileReadError(OSError):
    """``path`` could not be read; ``str()`` is one line: ``<path>: <detail>``."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.path}: {self.detail}"


def kind(mode: int) -> str:
    """What a non-regular file is, for an error message."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "unknown type"


def read(path: str | os.PathLike[str], limit: int = CONFIG_MAX, *, follow: bool = True) -> bytes:
    """Return the bytes of the regular file ``path``, at most ``limit``; raise FileReadError.

    ``follow=False``: a symbolic link as ``path`` itself is refused with ``O_NOFOLLOW``.
    """
    name = os.fspath(path)
    try:
        fd = os.open(name, _FLAGS if follow else _FLAGS | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        detail = f"cannot read: {exc.strerror or exc}"
        if exc.errno == errno.ELOOP and not follow:
            detail = "a symbolic link, not followed"
        elif exc.errno == errno.ENXIO:  # a socket, or a FIFO or device with nothing behind it
            with contextlib.suppress(OSError):
                detail = f"not a regular file ({kind(os.stat(name).st_mode)})"
        raise FileReadError(name, detail) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileReadError(name, f"not a regular file ({kind(st.st_mode)})")
        if st.st_size > limit:
            raise FileReadError(
                name, f"file is {st.st_size} bytes, larger than the {limit} allowed"
            )
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except FileReadError:
        raise
    except OSError as exc:
        raise FileReadError(name, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise FileReadError(name, f"file is larger than the {limit} bytes allowed")
    return b"".join(chunks)


def read_text(path: str | os.PathLike[str], limit: int = CONFIG_MAX) -> str:
    """Return :func:`read` decoded as UTF-8; a non-UTF-8 file is a FileReadError."""
    data = read(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileReadError(
            os.fspath(path), f"not UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
