"""The agent's rules, file by file, with the last valid version of each.

- ``--rules`` is a file or a directory, read every pass.
- A file is read again only when its inode, size or mtime changed.
- A file that becomes unreadable or invalid keeps its last valid rules, so its labels stay.
  It is stale in :class:`StaleFiles` until valid again.
- Invalid means: garbage, truncated YAML, an empty file, a directory or FIFO in its place,
  over the size limit, or one invalid rule.
- The ``--rules`` path deleted is stale too, and so is a file replaced by a directory or back.
- A valid change is honoured and logged. It is a file's rules changed, a file removed from
  the directory so its rules no longer apply, or an empty directory with no rules.

A file broken before any valid version was seen is *unusable*: ``kept=False`` in
:meth:`StaleFiles.stale`. A missing ``--rules`` path is too. The agent then publishes
nothing new until the file is valid or removed. So a restart with a broken ConfigMap
never replaces the labels on the Node with ones built without its rules.

"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from nfd_gpu.agent.lastvalid import StaleFiles
from nfd_gpu.rules.expressions import ENGINE_UNAVAILABLE
from nfd_gpu.rules.incremental import Outline
from nfd_gpu.rules.loader import RuleCache, load_rule_file, rule_files
from nfd_gpu.rules.model import Rule, RuleError, RuleObject, RuleSet

log = logging.getLogger("nfd_gpu.agent")  # one logger for the agent's lines (docs/operations.md)

Stamp = tuple[int, int, int, int]


@dataclass
class _File:
    stamp: Stamp | None  # of the content last read
    objects: tuple[RuleObject, ...]  # the last valid version (or the tolerant load)
    valid: bool  # objects are a valid version (not a tolerant load of a broken file)
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    # its rules by what they were parsed from: a reload parses only the changed ones
    parsed: dict[tuple[bool, bytes], Rule] = field(default_factory=dict)
    digest: bytes = b""  # of the text of a valid version (the same text is not parsed)
    # its chunks (rules/incremental.py): a reload of a valid version parses only what changed
    outline: Outline | None = None


def _stamp(f: Path) -> Stamp | None:
    try:
        st = os.stat(f)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)


def _names(objs: tuple[RuleObject, ...]) -> list[str]:
    return [f"{o.name}/{r.name}" for o in objs for r in o.rules]


class RuleFiles:
    """The RuleSet to evaluate, from ``load(path)`` every pass.

    It is the same object while nothing changed.
    """

    def __init__(self, stale: StaleFiles) -> None:
        self.stale = stale
        self._path: str | None = None
        self._is_dir: bool | None = None
        self._files: dict[str, _File] = {}
        self._ruleset: RuleSet | None = None
        self._path_stale = False  # the path itself is gone or changed kind

    def load(self, path: str) -> RuleSet:
        if path != self._path:
            for name in [*self._files, *([self._path] if self._path else [])]:
                self.stale.forget(name)
            self._path, self._is_dir, self._files, self._ruleset = path, None, {}, None
        p = Path(path)
        is_dir = p.is_dir()
        gone = not p.exists()
        if self._ruleset is not None and (gone or is_dir != self._is_dir):
            why = "no such file or directory" if gone else "replaced by a directory"
            if not gone and not is_dir:
                why = "no longer a directory"
            self.stale.stale(path, why)
            self._path_stale = True
            return self._ruleset
        if gone:
            self.stale.stale(path, "no such file or directory", kept=False)
            self._path_stale = True
            return RuleSet(problems=(f"{p}: no such file or directory",))
        try:
            files = rule_files(p)
        except RuleError as e:  # an unlistable directory: as if the path were gone
            why = e.problems[0].removeprefix(f"{p}: ")
            self.stale.stale(path, why, kept=self._ruleset is not None)
            self._path_stale = True
            return self._ruleset or RuleSet(problems=tuple(e.problems))
        if self._path_stale:
            self._path_stale = False
            self.stale.valid(path)
        self._is_dir = is_dir
        changed = self._ruleset is None
        seen = set()
        for f in files:
            seen.add(str(f))
            changed = self._read(f) or changed
        for name in sorted(set(self._files) - seen):
            entry = self._files.pop(name)
            self.stale.valid(name)
            log.info("rules: %s removed: %s no longer apply", name, _names(entry.objects) or "-")
            changed = True
        if changed or self._ruleset is None:
            entries = [self._files[k] for k in sorted(self._files)]
            self._ruleset = RuleSet(
                tuple(o for e in entries for o in e.objects),
                tuple(w for e in entries for w in e.warnings),
                tuple(pr for e in entries for pr in e.problems),
            )
        return self._ruleset

    def _read(self, f: Path) -> bool:
        """Read ``f`` again when it changed; True when the rules to apply changed."""
        name = str(f)
        stamp = _stamp(f)
        old = self._files.get(name)
        if old is not None and stamp is not None and stamp == old.stamp:
            return False
        problems: list[str] = []
        warnings: list[str] = []
        last = (old.digest, old.objects, old.warnings) if old and old.valid else None
        outline = old.outline if old and old.valid else None
        cache = RuleCache(old.parsed if old is not None else None, last, outline)
        objs = tuple(load_rule_file(f, True, problems, warnings, cache))
        # a rule RE2 cannot run here is that rule's problem (dropped), not the file's
        warnings += [p for p in problems if ENGINE_UNAVAILABLE in p]
        problems = [p for p in problems if ENGINE_UNAVAILABLE not in p]
        if not problems and stamp is not None and stamp[1] == 0 and old is not None:
            problems.append(f"{f}: empty file (delete it to remove its rules)")
        if problems:
            first = problems[0].removeprefix(f"{f}: ")
            more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
            if old is not None and old.valid:
                self.stale.stale(name, first + more)
                old.stamp = stamp
                return False
            self.stale.stale(name, first + more, kept=False)
            self._files[name] = _File(
                stamp, objs, False, tuple(problems), tuple(warnings), cache.fresh
            )
            return True
        self.stale.valid(name)
        for w in warnings:
            (log.warning if ENGINE_UNAVAILABLE in w else log.info)("%s", w)
        if old is not None and old.objects != objs:
            before, after = set(_names(old.objects)), set(_names(objs))
            log.info(
                "rules: %s changed: %d rules (added %s, removed %s, %d kept)",
                name,
                len(after),
                sorted(after - before) or "-",
                sorted(before - after) or "-",
                len(before & after),
            )
        elif old is None and self._ruleset is not None:
            log.info("rules: %s added: %s", name, _names(objs) or "-")
        self._files[name] = _File(
            stamp, objs, True, (), tuple(warnings), cache.fresh, cache.text, cache.next_outline
        )
        return old is None or old.objects != objs or not old.valid
