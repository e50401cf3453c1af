"""A rule file's reload that parses only the rules whose text changed.

- A full load cuts the file into chunks: each rule of a block ``rules:`` list is one chunk,
  from its ``- `` line to the next rule's; the text around the lists is chunks too.
- :class:`Outline` keeps each chunk's length and digest, not the text.
- The next version is matched chunk by chunk from its start and from its end. What is left,
  the middle, must lie within one ``rules:`` list and start with a ``- `` line at its column.
- The middle alone is parsed in the rules list's own context: the text from its document's
  first line to the list's first rule, then the middle, then a sentinel rule at the column.
- The sentinel must come back as the list's last item: the middle then ends where a rule of
  that list may start, as a rule of the last version did, so the rest parses as before.
- Without text after the middle, the list must be the last node of its document, and the
  document the last one.
- Anything else is a full parse: a change outside the lists, directives (``%``), anchors
  with aliases, a list emptied.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from nfd_gpu.record import Record, record
from nfd_gpu.rules.model import Rule, RuleObject
from nfd_gpu.rules.yamldocs import YAML_LOADER, constructed
from nfd_gpu.yamllib import yaml

SENTINEL = "nfd-gpu-reload-sentinel"
# where a RuleObject's rules list may be in a document (rule_objects_from_documents)
_PLACES = (("spec", "rules"), ("rules",))
Path_ = tuple[Any, ...]


def _digest(chunk: str) -> bytes:
    return hashlib.blake2b(chunk.encode(), digest_size=16).digest()


def _child(node: Any, key: str) -> Any:
    """The value of ``key`` in a block mapping node: None when absent, repeated or merged."""
    if not isinstance(node, yaml.MappingNode) or node.flow_style:
        return None
    found = None
    for k, v in node.value:
        if not isinstance(k, yaml.ScalarNode) or k.tag == "tag:yaml.org,2002:merge":
            return None
        if k.value == key and k.tag == "tag:yaml.org,2002:str":
            if found is not None:
                return None
            found = v
    return found


def _navigate(root: Any, path: Path_, last: bool = False) -> Any:
    """The node at ``path`` (keys and ``items`` indexes); ``last``: each step the last child."""
    node = root
    for step in path:
        if isinstance(step, int):
            if not isinstance(node, yaml.SequenceNode) or node.flow_style:
                return None
            if step >= len(node.value) or (last and step != len(node.value) - 1):
                return None
            node = node.value[step]
        else:
            child = _child(node, step)
            if child is None or (last and node.value[-1][1] is not child):
                return None
            node = child
    return node


@record()
class _Marks(Record):
    """A rules list of the full parse: its rules' line starts, its end, its dash column."""

    starts: tuple[int, ...]
    end: int
    column: int


def _item_starts(nodes: list[Any], text: str) -> tuple[tuple[int, ...], int] | None:
    """Each item's line start and the dash column, or None when an item does not begin on a
    ``- `` line of its own at one column."""
    starts: list[int] = []
    column = -1
    for item in nodes:
        s = item.start_mark.index
        ls = text.rfind("\n", 0, s) + 1
        lead = text[ls:s]
        dash = lead.rstrip(" ")
        n = len(dash) - 1
        if n < 0 or dash != " " * n + "-" or len(lead) == len(dash) or column not in (-1, n):
            return None
        column = n
        starts.append(ls)
    return tuple(starts), column


def doc_marks(root: Any, text: str) -> tuple[int, dict[Path_, _Marks]] | None:
    """What an outline needs of one composed document: its first line and its rules lists."""
    if not isinstance(root, yaml.MappingNode) or root.flow_style or root.start_mark.column:
        return None
    paths: list[Path_] = list(_PLACES)
    items = _child(root, "items")
    if isinstance(items, yaml.SequenceNode):
        paths += [("items", i, *p) for i in range(len(items.value)) for p in _PLACES]
    found: dict[Path_, _Marks] = {}
    for p in paths:
        seq = _navigate(root, p)
        if not isinstance(seq, yaml.SequenceNode) or seq.flow_style or not seq.value:
            continue
        got = _item_starts(seq.value, text)
        if got is None:
            continue
        end = seq.end_mark.index
        if end < len(text):
            ls = text.rfind("\n", 0, end) + 1
            if text[ls:end].strip(" "):
                continue
            end = ls
        found[p] = _Marks(got[0], end, got[1])
    return root.start_mark.index, found


@record()
class _List(Record):
    obj: int  # index of its RuleObject
    root: int  # line start of its document
    first: int  # its first chunk
    count: int
    column: int
    path: Path_  # below the document root


@record()
class Outline(Record):
    """A valid version's chunks (module docstring), its rule objects and warnings."""

    strict: bool
    lengths: array[int]
    digests: bytes
    owners: array[int]  # per chunk: its list's number, -1 for text around the lists
    lists: tuple[_List, ...]
    objects: tuple[RuleObject, ...]
    warnings: tuple[str, ...]


def _outline(
    text: str,
    strict: bool,
    cuts: list[tuple[int, int, int, int, int, Path_]],
    objects: Sequence[RuleObject],
    warnings: Sequence[str],
) -> Outline | None:
    """The outline of ``text`` cut at ``cuts``: (obj, root, column, start, end, path) per rule,
    in text order."""
    lengths: array[int] = array("q")
    owners: array[int] = array("q")
    lists: list[_List] = []
    pos = 0
    for obj, root, column, start, end, path in cuts:
        if start < pos:
            return None
        if start > pos:
            lengths.append(start - pos)
            owners.append(-1)
        lengths.append(end - start)
        owners.append(-1)  # numbered below
        pos = end
        if not lists or lists[-1].obj != obj or lists[-1].path != path:
            lists.append(_List(obj, root, len(lengths) - 1, 0, column, path))
        last = lists[-1]
        lists[-1] = _List(last.obj, last.root, last.first, last.count + 1, column, path)
        owners[-1] = len(lists) - 1
    if pos < len(text):
        lengths.append(len(text) - pos)
        owners.append(-1)
    digests, pos = [], 0
    for n in lengths:
        digests.append(_digest(text[pos : pos + n]))
        pos += n
    return Outline(
        strict, lengths, b"".join(digests), owners, tuple(lists), tuple(objects), tuple(warnings)
    )


def build_outline(
    text: str,
    strict: bool,
    marks: Sequence[tuple[int, dict[Path_, _Marks]] | None],
    objects: Sequence[RuleObject],
    paths: Sequence[Path_],
    warnings: Sequence[str],
) -> Outline | None:
    """The outline of a valid full load: ``marks`` per document, ``paths`` per object
    (document index first). A list that cannot be cut is left whole in the text around."""
    if len(paths) != len(objects) or _unsafe(text):
        return None
    cuts: list[tuple[int, int, int, int, int, Path_]] = []
    for i, (obj, path) in enumerate(zip(objects, paths, strict=True)):
        doc = marks[path[0]] if path[0] < len(marks) else None
        m = doc[1].get(path[1:]) if doc is not None else None
        if doc is None or m is None or len(m.starts) != len(obj.rules):
            continue
        ends = (*m.starts[1:], m.end)
        spans = zip(m.starts, ends, strict=True)
        cuts += [(i, doc[0], m.column, s, e, path[1:]) for s, e in spans]
    cuts.sort(key=lambda c: c[3])
    return _outline(text, strict, cuts, objects, warnings)


# YAML's line breaks (libyaml's): a directive's ``%`` may follow any of them
_BREAKS = ("\n", "\r", "\x85", "\u2028", "\u2029")


def _unsafe(text: str) -> bool:
    """A part of the file does not parse alone, or libyaml's marks do not index the text.

    - Directives (``%`` at a line start, after any YAML line break): the whole document's.
    - Anchors with aliases.
    - A byte order mark: libyaml skips it without counting it in its marks.
    """
    if "\ufeff" in text or text.startswith("%") or ("&" in text and "*" in text):
        return True
    return any(b + "%" in text for b in _BREAKS)


@dataclass
class Splice:
    """A reload's changed rules: items ``lo:hi`` of list ``which`` become ``items``."""

    which: int
    lo: int
    hi: int
    items: list[Any]  # the new rules' parsed mappings
    chunks: list[tuple[int, int]] | None  # their (start, end) in the text; None: not cut
    old: Outline
    text: str
    a: int  # the last version's chunks a:b were replaced
    b: int

    def outline(self, objects: Sequence[RuleObject], warnings: Sequence[str]) -> Outline | None:
        """The outline of this version, given its rule objects: the last one's chunks with
        the middle's in place of chunks ``a:b``."""
        old, lst = self.old, self.old.lists[self.which]
        if self.chunks is None or not objects[lst.obj].rules:
            return None
        a, b, new = self.a, self.b, self.chunks
        delta = len(new) - (b - a)
        # the later lists' documents start that many characters later or earlier
        at = sum(old.lengths[:a])
        shift = sum(e - s for s, e in new) - sum(old.lengths[a:b])
        lists = list(old.lists)
        lists[self.which] = replace(lst, count=lst.count + delta)
        for k in range(self.which + 1, len(lists)):
            later = lists[k]
            root = later.root + shift if later.root >= at else later.root
            lists[k] = replace(later, first=later.first + delta, root=root)
        return Outline(
            old.strict,
            old.lengths[:a] + array("q", [e - s for s, e in new]) + old.lengths[b:],
            old.digests[: a * 16]
            + b"".join(_digest(self.text[s:e]) for s, e in new)
            + old.digests[b * 16 :],
            old.owners[:a] + array("q", [self.which] * len(new)) + old.owners[b:],
            tuple(lists),
            tuple(objects),
            tuple(warnings),
        )


def splice(text: str, outline: Outline) -> Splice | None:
    """The changed rules of ``text`` against the ``outline`` of its last version, or None when
    only a full parse tells (module docstring)."""
    if _unsafe(text):
        return None
    lengths, digests, n = outline.lengths, outline.digests, len(outline.lengths)
    pos = a = 0
    while a < n and _digest(text[pos : pos + lengths[a]]) == digests[a * 16 : a * 16 + 16]:
        pos += lengths[a]
        a += 1
    end, b = len(text), n
    while b > a and end - lengths[b - 1] >= pos:
        if _digest(text[end - lengths[b - 1] : end]) != digests[b * 16 - 16 : b * 16]:
            break
        end -= lengths[b - 1]
        b -= 1
    owners = outline.owners
    if a > 0 and owners[a - 1] >= 0 and pos < end:
        lead = " " * outline.lists[owners[a - 1]].column + "- "
        if not text.startswith(lead, pos):  # lines added to the rule before: parse it too
            a -= 1
            pos -= lengths[a]
    if a < b:
        which = owners[a]
        if which < 0 or any(owners[k] != which for k in range(a, b)):
            return None
    elif a < n and owners[a] >= 0:
        which = owners[a]
    elif a > 0 and owners[a - 1] >= 0 and (a == n or owners[a] < 0):
        which = owners[a - 1]
    else:
        return None
    lst = outline.lists[which]
    lo, hi = a - lst.first, b - lst.first
    middle = text[pos:end]
    lead = " " * lst.column + "- "
    if middle and (not middle.startswith(lead) or (pos and text[pos - 1] != "\n")):
        return None  # the middle starts a line (a last version's last line may not end)
    tail = end < len(text)
    if tail and text[end - 1] != "\n":
        return None
    if not middle and lo == 0 and hi == lst.count:
        return None  # every rule deleted: ``rules:`` then is null or the next key's, not []
    item0 = sum(lengths[: lst.first])
    skeleton = text[lst.root : item0]
    items, chunks = _parse_middle(skeleton, middle, lst, tail, pos) if middle else ([], [])
    if items is None:
        return None
    return Splice(which, lo, hi, items, chunks, outline, text, a, b)


def _parse_middle(
    skeleton: str, middle: str, lst: _List, tail: bool, pos: int
) -> tuple[list[Any] | None, list[tuple[int, int]] | None]:
    """The middle's rules parsed in their list's context (module docstring), and their chunks
    in the text (None when they cannot be cut for the next reload)."""
    iso = skeleton + middle + (" " * lst.column + "- " + SENTINEL + "\n" if tail else "")
    loader = YAML_LOADER(iso)
    try:
        roots = []
        while loader.check_node():
            roots.append(loader.get_node())
        if len(roots) != 1:
            return None, None
        seq = _navigate(roots[0], lst.path, last=not tail)
        if not isinstance(seq, yaml.SequenceNode) or seq.flow_style:
            return None, None
        if seq.start_mark.index != len(skeleton) + lst.column:
            return None, None
        nodes = list(seq.value)
        if tail:
            last = nodes.pop() if nodes else None
            where = len(iso) - len(SENTINEL) - 1
            if (
                not isinstance(last, yaml.ScalarNode)
                or last.value != SENTINEL
                or last.style  # plain: None, or "" from libyaml
                or last.start_mark.index != where
            ):
                return None, None
        seen: dict[str, str] = {}
        items = [constructed(loader, node, seen) for node in nodes]
        chunks: list[tuple[int, int]] | None = None
        got = _item_starts(nodes, iso)
        if got is not None and got[1] == lst.column and got[0][0] == len(skeleton):
            shift = pos - len(skeleton)
            starts = [s + shift for s in got[0]]
            chunks = list(zip(starts, [*starts[1:], pos + len(middle)], strict=True))
        return items, chunks
    except (yaml.YAMLError, RecursionError):
        return None, None
    finally:
        loader.dispose()


def reload(
    text: str,
    source: str,
    cache: Any,
    problems: list[str],
    warnings: list[str],
    rules_of: Callable[[list[Any], str, int], list[Rule]],
) -> list[RuleObject] | None:
    """The rule objects of ``text`` from the last version's (``cache.outline``, a RuleCache's)
    by :func:`splice`: the changed rules made by ``rules_of(items, object name, index of the
    first)``, the others kept, with their keys in ``cache.fresh``. None: a full parse tells."""
    last: Outline = cache.outline
    sp = splice(text, last)
    if sp is None:
        return None
    at = last.lists[sp.which].obj
    old = last.objects[at]
    mark = len(problems)
    new = rules_of(sp.items, old.name, sp.lo)
    objs = list(last.objects)
    objs[at] = RuleObject(old.name, source, (*old.rules[: sp.lo], *new, *old.rules[sp.hi :]))
    kept = {id(r) for o in objs for r in o.rules}
    for k, r in cache.rules.items():
        if id(r) in kept:
            cache.fresh.setdefault(k, r)
    warnings.extend(last.warnings)
    if len(problems) == mark:
        cache.next_outline = sp.outline(objs, last.warnings)
    return objs
