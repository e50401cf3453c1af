"""Rule files' YAML: libyaml's parse into documents, with the safe loader's types.

- Alias expansion is bounded.
- The documents are built compactly.
- rules/loader.py reads them.
"""

from __future__ import annotations

import gc
import pickle
from collections.abc import Callable
from typing import Any

from nfd_gpu.yamllib import yaml

# YAML aliases may not expand a file beyond this many nodes (and ten times its own
# size): an "alias bomb" of a few KB would otherwise expand to billions of nodes.
MAX_EXPANDED_NODES = 200_000
ALIAS_EXPANSION_RATIO = 10

# libyaml's safe loader when PyYAML was built with it (10,000 rules: 10.2 s -> 4.5 s);
# the same safe constructors as yaml.SafeLoader.
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_SAFE_LOADER):  # type: ignore[misc]
    """The safe loader with its tag resolution remembered per file.

    - A rule file repeats a few hundred distinct scalars thousands of times: ``op``, ``In``,
      ``pci.device`` ...
    - Each node's implicit tag is a Python regexp match, a fifth of a parse.
    - The tag depends only on the node kind, value and implicit flags.
    - That holds as the safe loader has no path resolvers: ``yaml_path_resolvers`` is empty,
      which is checked below.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._tags: dict[tuple[Any, Any, Any], str] = {}

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        try:
            tag: str = self._tags[kind, value, implicit]
            return tag
        except KeyError:
            tag = self._tags[kind, value, implicit] = super().resolve(kind, value, implicit)
            return tag

    # Without path resolvers these only return (BaseResolver's first line): libyaml's
    # composer calls both for every node, so they are builtins that do nothing here (a
    # bound ``{}.get`` takes the node and index; ``tuple`` takes nothing).
    descend_resolver: Any = {}.get
    ascend_resolver: Any = tuple


assert not _SAFE_LOADER.yaml_path_resolvers, "tags would depend on the node's path"
YAML_LOADER: Any = _Loader


class _Aliasing(Exception):
    pass


class _Recursive(_Aliasing):
    pass


def _expanded_size(node: Any) -> tuple[int, int]:
    """Physical nodes and nodes after alias expansion of a composed YAML node graph.

    - They are counted without expanding: each distinct node is visited once.
    - A node that contains itself, ``&a [*a]``, raises :class:`_Recursive`: it expands without
      end.
    """
    sizes: dict[int, int] = {}
    open_: set[int] = set()  # nodes whose children are being counted: the current path
    physical = 0
    stack: list[tuple[Any, bool]] = [(node, False)]
    while stack:
        n, done = stack.pop()
        if not done and id(n) in open_:
            raise _Recursive
        if id(n) in sizes and not done:
            continue
        children: list[Any] = []
        if isinstance(n, yaml.SequenceNode):
            children = list(n.value)
        elif isinstance(n, yaml.MappingNode):
            children = [x for kv in n.value for x in kv]
        if done:
            open_.discard(id(n))
            total = 1 + sum(sizes[id(c)] for c in children)
            sizes[id(n)] = total
            if total > MAX_EXPANDED_NODES and total > ALIAS_EXPANSION_RATIO * max(physical, 1):
                raise _Aliasing
            continue
        physical += 1
        open_.add(id(n))
        stack.append((n, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return physical, sizes[id(node)]


_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"


def constructed(loader: Any, node: Any, seen: dict[str, str]) -> Any:
    """``loader.construct_document(node)`` for a node graph without aliases, each node in one place.

    - The strings, maps and lists are built directly. They are all a rule file holds but a
      few numbers or booleans.
    - Everything else is built by the safe constructor itself, its ``construct_object``:
      ints, booleans, nulls, timestamps, a merge key's mapping, an unhashable key's error.
    - The objects are the same as the constructor's generators and per-node dispatch build,
      in the same order. That dispatch is a third of a parse.
    - Equal strings are made one object through ``seen``, as :func:`_share_strings` does.
    """
    slow = loader.construct_object
    share = seen.setdefault
    scalar, mapping, sequence = yaml.ScalarNode, yaml.MappingNode, yaml.SequenceNode

    def build(n: Any) -> Any:
        tag, cls = n.tag, type(n)
        if tag == _STR_TAG and cls is scalar:
            return share(n.value, n.value)
        if tag == _MAP_TAG and cls is mapping:
            out: dict[Any, Any] = {}
            for k, v in n.value:
                if k.tag != _STR_TAG or type(k) is not scalar:
                    return slow(n, deep=True)  # merge keys, '=' keys, typed keys: theirs
                out[share(k.value, k.value)] = build(v)
            return out
        if tag == _SEQ_TAG and cls is sequence:
            return [build(c) for c in n.value]
        return slow(n, deep=True)

    try:
        return build(node)
    finally:
        loader.constructed_objects = {}
        loader.recursive_objects = {}
        loader.state_generators = []
        loader.deep_construct = False


def load_yaml_documents(text: str, on_root: Callable[[Any], None] | None = None) -> list[Any]:
    """``yaml.safe_load_all`` with libyaml when present and a bound on alias expansion.

    - Past the bound it raises yaml.YAMLError with problem ``excessive aliasing``.
    - ``on_root`` is given each document's composed node, None where aliases may be.
    """
    loader = YAML_LOADER(text)
    docs: list[Any] = []
    seen: dict[str, str] = {}  # equal strings made one object (_share_strings)
    aliased = "&" in text and "*" in text  # an alias names an anchor: neither, no alias
    # No collection while the node graph is built and turned into documents: it holds no
    # cycle (reference counts free it), and the collector would walk its growing heap of
    # young objects hundreds of times per 1,000 rules.
    collecting = gc.isenabled()
    gc.disable()
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            if on_root is not None:
                on_root(None if aliased else node)
            if not aliased:
                docs.append(constructed(loader, node, seen))
                continue
            try:
                _expanded_size(node)
            except _Aliasing as e:
                err = yaml.YAMLError()
                err.problem = (  # type: ignore[attr-defined]
                    "recursive alias: a node contains itself"
                    if isinstance(e, _Recursive)
                    else f"excessive aliasing: aliases expand the document beyond "
                    f"{MAX_EXPANDED_NODES} nodes"
                )
                raise err from None
            doc = [loader.construct_document(node)]
            _share_strings(doc, seen)
            docs.extend(doc)
    finally:
        if collecting:
            gc.enable()
        loader.dispose()
    return docs


def compacted(docs: list[Any]) -> list[Any]:
    """``docs`` rebuilt in one go, after the composed nodes are gone.

    - ``docs`` is the caller's only reference.
    - The documents are built while libyaml's node graph is alive: ~40 bytes of objects per
      byte of YAML.
    - So their objects lie scattered among the freed nodes.
    - The strings the rules keep pin that memory for the agent's life: ~8 MB of RSS with
      1,000 rules.
    - A copy made afterwards lies together, and the graph's memory is returned first.
    - The copy is a pickle: exact for every YAML type and shared reference. It only ever
      reads what it wrote here.
    - Equal strings, such as keys, ops and feature names, are one object already by
      :func:`load_yaml_documents`.
    """
    blob = pickle.dumps(docs, protocol=pickle.HIGHEST_PROTOCOL)
    del docs[:]
    # A full collection here also empties the interpreter's free lists before the copy is
    # made (1,000 rules: 8 MB less RSS, measured); it costs ~0.25 ms in the agent, whose
    # start-up objects are frozen (gc.freeze), as the documents are gone by now.
    gc.collect()
    out: list[Any] = pickle.loads(blob)  # only the bytes written just above
    trim_heap()
    return out


def _share_strings(docs: list[Any], seen: dict[str, str]) -> None:
    """Make equal strings in the documents' mappings and lists one object.

    - YAML makes one per occurrence: 1,000 rules repeat ``feature``, ``op``, ``pci.device``
      ... thousands of times.
    - It is iterative and visits each container once. An alias shares one; YAML may nest one
      in itself.
    """
    visited: set[int] = set()
    stack: list[Any] = [docs]
    while stack:
        node = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, dict):
            items = list(node.items())
            node.clear()  # re-inserted in order, with the shared key and value
            for k, v in items:
                if isinstance(k, str):
                    k = seen.setdefault(k, k)
                if isinstance(v, str):
                    v = seen.setdefault(v, v)
                elif isinstance(v, (dict, list)):
                    stack.append(v)
                node[k] = v
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if isinstance(v, str):
                    node[i] = seen.setdefault(v, v)
                elif isinstance(v, (dict, list)):
                    stack.append(v)


def trim_heap() -> None:
    """Hand the heap pages a rule file's parse freed back to the system.

    - glibc keeps them: ~2 MB of RSS after 1,000 rules.
    - Nothing happens where the C library has no ``malloc_trim``.
    """
    import ctypes  # lazy: already loaded by hostroot in a scan

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)
