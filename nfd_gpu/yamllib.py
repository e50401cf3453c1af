"""PyYAML for every module of the package: ``from nfd_gpu.yamllib import yaml``.

- PyYAML compiles its regular expressions as it is imported, about half of its import.
- The largest is its pure-Python reader's class of non-printable characters: ~8 ms of the
  agent's start on the benchmarks' machine. The package reads YAML with libyaml's loader
  (rules/yamldocs.py, config/yamlfile.py), which never runs that reader.
- So the patterns PyYAML's modules compile while they are imported here are compiled on
  first use instead: :class:`DeferredPattern`, the same pattern and flags, the same
  results. What PyYAML compiles after its import is compiled as usual.
- ``re.compile`` is replaced only while PyYAML's modules run, and restored even if that
  import fails. The package imports this module at start, before any thread of its own.
- If PyYAML was imported before this module, as a host process might, it is used as it is.

``benchmarks/startup.py`` measures the agent's start with it; tests/test_yamllib.py judges
each deferred pattern by the compiled one.
"""

from __future__ import annotations

import re
import sys
from typing import Any

__all__ = ["DeferredPattern", "yaml"]


class DeferredPattern:
    """``re.compile(pattern, flags)``, compiled the first time one of its attributes is read.

    - Each attribute read is then kept on the object: ``p.match`` is the compiled pattern's
      own bound method, looked up at a dict's cost (a dump resolves thousands of scalars).
    - A copy is the object itself; a pickle is the compiled pattern's.
    - It is no ``re.Pattern``: ``isinstance``, ``re.match(p, s)`` and ``==`` do not see one.
      PyYAML does none of them, nor does any module of the package.
    """

    def __init__(self, pattern: Any, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[Any] | None = None

    def compiled(self) -> re.Pattern[Any]:
        """The compiled pattern. Two threads asking first may both compile it: the same one."""
        if self._compiled is None:
            self._compiled = _COMPILE(*self._args)
        return self._compiled

    def __getattr__(self, name: str) -> Any:  # match, search, sub, pattern, flags ...
        if name.startswith("_"):  # a probe (copy's, pickle's): never the compiled pattern's
            raise AttributeError(name)
        value = getattr(self.compiled(), name)
        setattr(self, name, value)  # read from the object's dict from now on
        return value

    def __copy__(self) -> DeferredPattern:
        return self

    def __deepcopy__(self, memo: Any) -> DeferredPattern:
        return self

    def __reduce__(self) -> tuple[Any, tuple[Any, int]]:
        return _COMPILE, self._args

    def __repr__(self) -> str:
        state = "compiled" if self._compiled is not None else "not compiled yet"
        return f"DeferredPattern({self._args[0]!r}, {self._args[1]!r}; {state})"


_COMPILE = re.compile

if "yaml" not in sys.modules:
    re.compile = DeferredPattern  # type: ignore[assignment]
    try:
        import yaml as yaml
    finally:
        re.compile = _COMPILE
else:
    import yaml as yaml  # already imported elsewhere: used as it is
