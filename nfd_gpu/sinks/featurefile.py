"""Feature-file sink: NFD's ``local`` source reads ``features.d/<file>``.

The format, as tests/sinks/nfd_local_parser.py parses it:

- one ``key=value`` per line;
- ``# +expiry-time=<RFC3339>`` applies to the lines after it;
- ``# +no-label`` keeps the next line out of the node labels: a raw feature only;
- other ``#`` lines are comments;
- one of them, ``# nfd-gpu-held-health:``, holds the agent's held health:
  ``Publication.state``, read back at start by ``read_state``.

NFD skips files over 65,536 bytes as a whole, ignores names starting with ``.``, and reads
on change, by fsnotify, or every sleep interval.

Writes are atomic:

- a ``.nfd-gpu.*`` temp file in the same directory, ignored by NFD;
- fsync, chmod 0644, ``os.replace``, fsync of the directory;
- any failure leaves the old file in place.

The file is the agent's:

- every pass reads it back and compares it with what was written;
- that read takes at most NFD's 65,536 bytes, regular files only, never following a link
  or blocking;
- a file removed, replaced or edited by someone else is rewritten at once;
- ``take_repair()`` says what differed; the agent logs and counts it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TextIO

from nfd_gpu.features import Features, owned
from nfd_gpu.host import boundedfile
from nfd_gpu.sinks import Output, OutputSettings, Publication, Sink, SinkError

log = logging.getLogger(__name__)

MAX_FILE_SIZE = 65536  # NFD's MaxFeatureFileSize
FILE_MODE = 0o644


def _line_ok(key: str, value: str) -> bool:
    """A key/value pair that survives NFD's line parser unchanged as one line."""
    if not key or "=" in key or key != key.strip() or value != value.strip():
        return False
    if key.startswith("#"):
        return False
    return not any(c in s for s in (key, value) for c in "\n\r\x00\x0b\x0c\x1c\x1d\x1e\x85")


def raw_feature_lines(features: Features) -> Iterator[tuple[str, str]]:
    """Flatten raw features to ``key=value`` lines.

    - Flags are ``<feature>.<elem>=true``.
    - Attributes are ``<feature>.<elem>=<value>``.
    - Instances are ``<feature>.<index>.<attr>=<value>``.
    - Only the features nfd-gpu owns, ``gpu.*``: nfd-worker's own sources already publish
      ``pci.device`` and ``kernel.loadedmodule``.
    - NFD's local source turns each line into one element of the ``local.feature`` attribute
      feature.
    - Instances are flattened, so a NodeFeatureRule cannot match ``gpu.device`` instances
      from a feature file.
    """
    features = owned(features)
    for name, fs in sorted(features.get("flags", {}).items()):
        for elem in sorted(fs.get("elements", {})):
            yield f"{name}.{elem}", "true"
    for name, fs in sorted(features.get("attributes", {}).items()):
        for elem, value in sorted(fs.get("elements", {}).items()):
            yield f"{name}.{elem}", str(value)
    for name, fs in sorted(features.get("instances", {}).items()):
        for i, inst in enumerate(fs.get("elements", [])):
            for attr, value in sorted(inst.get("attributes", {}).items()):
                yield f"{name}.{i}.{attr}", str(value)


def rfc3339(ts: float) -> str:
    return dt.datetime.fromtimestamp(int(ts), tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def render_body(pub: Publication, *, raw: bool) -> str:
    """The file content after the expiry directive: sorted labels, then raw features."""
    lines: list[str] = []
    for key in sorted(pub.labels):
        value = pub.labels[key]
        if not _line_ok(key, value):
            log.warning("feature file: skipping label %r that cannot be written as one line", key)
            continue
        lines.append(f"{key}={value}")
    if raw:
        label_keys = set(pub.labels)
        for key, value in raw_feature_lines(pub.features):
            # '# +no-label' on a key that is also a label would delete that label in NFD.
            if key in label_keys or not _line_ok(key, value):
                continue
            lines.append("# +no-label")
            lines.append(f"{key}={value}")
    return "".join(line + "\n" for line in lines)


# The agent's held health (``Publication.state``) as one plain comment line, which NFD's
# parser skips (only ``# +`` lines are directives): read back at start (agent/heldstate.py).
STATE_PREFIX = "# nfd-gpu-held-health: "


def state_line(state: str) -> str:
    """The comment line holding ``state``; "" for none, or for one that is not one line."""
    if not state or not _line_ok("state", state):
        return ""
    return f"{STATE_PREFIX}{state}\n"


def render(pub: Publication, *, expires_at: float, raw: bool) -> str:
    header = "# Written by nfd-gpu; do not edit (atomically replaced).\n" + state_line(pub.state)
    return f"{header}# +expiry-time={rfc3339(expires_at)}\n" + render_body(pub, raw=raw)


def atomic_write(path: str, data: bytes, mode: int = FILE_MODE) -> None:
    """Replace ``path`` with ``data`` atomically; on any error the old file is untouched."""
    directory = os.path.dirname(path) or "."
    base = os.path.basename(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=directory)
    try:
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class FeatureFileSink(Sink):
    """Write ``<features_dir>/<features_file>``; rewrite only on change or to refresh expiry."""

    name = "featurefile"

    def __init__(
        self,
        directory: str,
        filename: str = "nfd-gpu",
        *,
        expiry: float = 3600.0,
        raw_features: bool = False,
        remove_on_exit: bool = False,
        clock: Callable[[], float] = time.time,
        dry_run: bool = False,
        stream: TextIO | None = None,
    ) -> None:
        self.directory = directory
        self.path = os.path.join(directory, filename)
        self.expiry = expiry
        self.raw_features = raw_features
        self.remove_on_exit = remove_on_exit
        self.clock = clock
        self._body: str | None = None
        self._state = ""  # the held health of the last write
        self._expires_at = 0.0
        self._written: bytes | None = None  # the bytes of our last write
        self._repaired: str | None = None
        # --dry-run: the same decisions (when to write, the size rules), the content printed
        # to ``stream`` (stdout at write time) after a "# would write <path>" line; nothing
        # on disk is read or written
        self._dry_run = dry_run
        self._stream = stream

    def _drift(self) -> str | None:
        """How the file on disk differs from our last write; None: it is ours."""
        if self._dry_run:
            return None
        try:  # at most NFD's MaxFeatureFileSize: a larger file is not ours (NFD skips it)
            data = boundedfile.read(self.path, MAX_FILE_SIZE, follow=False)
        except boundedfile.FileReadError as e:
            return "removed" if not os.path.lexists(self.path) else f"unreadable: {e.detail}"
        if data == self._written:
            return None
        return "edited: " + _line_diff(self._written or b"", data)

    def where(self) -> str:
        return self.path

    def read_state(self) -> str | None:
        """The held health line of the file as an earlier run left it.

        - None: no file, or no such line.
        - SinkError naming the file when it cannot be read.
        """
        if self._dry_run:
            return None
        try:
            data = boundedfile.read(self.path, MAX_FILE_SIZE, follow=False)
        except boundedfile.FileReadError as e:
            if not os.path.lexists(self.path):
                return None
            raise SinkError(f"{self.path}: cannot read the feature file: {e.detail}") from None
        for line in data.decode("utf-8", "replace").splitlines():
            if line.startswith(STATE_PREFIX):
                return line[len(STATE_PREFIX) :]
        return None

    def take_repair(self) -> str | None:
        """What the last write restored, once: the file changed behind the agent's back."""
        repaired, self._repaired = self._repaired, None
        return repaired

    def publish(self, pub: Publication) -> bool:
        now = self.clock()
        body = render_body(pub, raw=self.raw_features)
        drift = self._drift() if self._written is not None else None
        same = body == self._body and pub.state == self._state
        if same and now < self._expires_at - self.expiry / 2 and drift is None:
            return False
        if self._body is None:
            why = "first write"
        elif drift is not None:
            why = f"restored: {drift}"
        elif body != self._body:
            why = "content changed"
        elif pub.state != self._state:
            why = "held health changed"
        else:
            why = "expiry refresh"
        expires_at = now + self.expiry
        content = render(pub, expires_at=expires_at, raw=self.raw_features)
        data = content.encode("utf-8")
        if len(data) > MAX_FILE_SIZE and self.raw_features:
            log.warning(
                "feature file %s would be %d bytes (> %d): dropping raw features",
                self.path,
                len(data),
                MAX_FILE_SIZE,
            )
            data = render(pub, expires_at=expires_at, raw=False).encode("utf-8")
        if len(data) > MAX_FILE_SIZE:
            raise SinkError(
                f"{self.path}: labels need {len(data)} bytes, over NFD's limit of "
                f"{MAX_FILE_SIZE}; kept the previous file"
            )
        self._write(data)
        log.info(
            "%s feature file %s (%s): %d labels, %d bytes, expires %s",
            "would write" if self._dry_run else "wrote",
            self.path,
            why,
            len(pub.labels),
            len(data),
            rfc3339(expires_at),
        )
        self._body = body
        self._state = pub.state
        self._expires_at = expires_at
        self._written = data
        self._repaired = drift
        return True

    def _write(self, data: bytes) -> None:
        if self._dry_run:
            out = self._stream or sys.stdout
            try:
                out.write(f"# would write {self.path}\n{data.decode('utf-8')}")
                out.flush()
            except (OSError, ValueError) as e:
                raise SinkError(f"stdout: cannot write dry-run output: {e}") from None
            return
        try:
            os.makedirs(self.directory, exist_ok=True)
            atomic_write(self.path, data)
        except OSError as e:
            raise SinkError(f"{self.path}: cannot write feature file: {e}") from None

    def close(self) -> None:
        if self.remove_on_exit and not self._dry_run:  # a dry run touches nothing on disk
            try:
                os.unlink(self.path)
                log.info("removed feature file %s", self.path)
            except FileNotFoundError:
                pass
            except OSError as e:
                log.error("%s: cannot remove feature file: %s", self.path, e.strerror)


def _line_diff(want: bytes, have: bytes) -> str:
    """The first lines added, +, and removed, -, from ``want`` to ``have``, in one line."""
    old = want.decode("utf-8", "replace").splitlines()
    new = have.decode("utf-8", "replace").splitlines()
    old_set, new_set = set(old), set(new)
    diffs = [f"+{line}" for line in new if line not in old_set]
    diffs += [f"-{line}" for line in old if line not in new_set]
    if not diffs:
        return "lines reordered or whitespace changed"
    more = f" and {len(diffs) - 5} more" if len(diffs) > 5 else ""
    return ", ".join(repr(d)[1:-1][:120] for d in diffs[:5]) + more


def _build(
    cfg: OutputSettings, stream: TextIO | None = None, *, dry_run: bool = False
) -> FeatureFileSink:
    return FeatureFileSink(
        cfg.features_dir,
        cfg.features_file,
        expiry=cfg.expiry,
        raw_features=cfg.raw_features,
        remove_on_exit=cfg.remove_on_exit,
        dry_run=dry_run,
        stream=stream,
    )


def _dry_run(cfg: OutputSettings, stream: TextIO | None) -> FeatureFileSink:
    """The sink itself, printing where it would write.

    - A pass prints when the real sink would write: a change, an expiry refresh.
    - It prints what it would write: the size rules.
    """
    return _build(cfg, stream, dry_run=True)


def _fill(values: Mapping[str, Any]) -> dict[str, Any]:
    """Under a ``--root`` other than ``/``, no directory by default.

    The host's features.d is not the scanned root's, and labels written there would label
    this node.
    """
    if "features_dir" in values or values.get("dry_run"):
        return {}
    return {} if os.path.normpath(str(values.get("root") or "/")) == "/" else {"features_dir": ""}


def _check(cfg: OutputSettings) -> str | None:
    if not cfg.features_dir:
        return (
            f"root {cfg.root!r} is not this host: say where the featurefile output writes "
            "(--features-dir or NFD_GPU_FEATURES_DIR; the default is the host's)"
        )
    if not cfg.oneshot and cfg.expiry < 2 * cfg.interval:
        return f"expiry ({cfg.expiry}s) must be at least twice the interval"
    name = cfg.features_file
    if not name or "/" in name or name.startswith("."):
        return f"features_file {name!r} must be a plain file name not starting with '.'"
    return None


OUTPUT = Output(
    "featurefile",
    settings=("features_dir", "features_file", "expiry", "raw_features", "remove_on_exit"),
    build=_build,
    dry_run=_dry_run,
    check=_check,
    describe=lambda cfg: f"features={os.path.join(cfg.features_dir, cfg.features_file)}",
    repairs=True,
    fill=_fill,
)
