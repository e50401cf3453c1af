"""A third-party package registered without running its ``__init__``, for start-up's sake.

- Some packages' ``__init__`` imports every part of them.
- ``kubernetes`` imports its watch, stream, informer and the kubeconfig reader.
- ``prometheus_client`` imports its exposition: an HTTP server, WSGI, ``urllib.request``.
- The agent needs a few modules of each, and they import as usual.
- A name the package does not hold yet runs the ``__init__`` then, once, by PEP 562.
- So code that imports the whole package later sees the whole package.
- ``from pkg import sub`` asks for such a name: import ``pkg.sub`` by its full name first.
  Or name ``sub`` in ``submodules``: then ``from pkg import sub``, as the package's own
  modules write it, imports the module alone.
- A subpackage can be registered before its parent is imported: the parent's own import
  then finds it, as ``urllib3`` does ``urllib3.http2``. It becomes the parent's attribute
  by :func:`attach`, once the parent is imported.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import threading
from typing import Any

# Held while a package's ``__init__`` runs on first use, and by callers importing modules
# of a lazy package: one thread runs it, the others wait for the whole package.
LOCK = threading.RLock()


def lazy_package(name: str, submodules: tuple[str, ...] = ()) -> None:
    """Register package ``name`` without running its ``__init__``.

    - Nothing is done when ``name`` is imported already.
    - A name that a test blocked, None in ``sys.modules``, raises what ``import`` raises.
    - ``ImportError`` when the package is not installed.
    - ``submodules``: names whose ``from name import sub`` imports that module alone. Only
      for modules the ``__init__`` does not rebind to something else.
    """
    if name in sys.modules:
        if sys.modules[name] is None:
            raise ImportError(f"import of {name} halted; None in sys.modules", name=name)
        return
    spec = _find(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"No module named {name!r}", name=name)
    loader = spec.loader
    module = importlib.util.module_from_spec(spec)
    ran = threading.Event()

    def __getattr__(attr: str) -> Any:  # PEP 562
        if attr in submodules:  # not held yet: ``import`` then loads the module itself
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        with LOCK:
            if not ran.is_set():
                ran.set()
                loader.exec_module(module)
                if attr in module.__dict__:
                    return module.__dict__[attr]
        raise AttributeError(f"module {name!r} has no attribute {attr!r}")

    module.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, module)


def attach(name: str) -> None:
    """Make module ``name`` the attribute of its imported parent, where it is not yet."""
    parent, _, child = name.rpartition(".")
    above, module = sys.modules.get(parent), sys.modules.get(name)
    if above is not None and module is not None:
        vars(above).setdefault(child, module)


def _find(name: str) -> importlib.machinery.ModuleSpec | None:
    """The spec of module ``name``; a subpackage's without importing its parent."""
    parent, _, _ = name.rpartition(".")
    if not parent or parent in sys.modules:
        return importlib.util.find_spec(name)
    above = _find(parent)
    if above is None or above.submodule_search_locations is None:
        return None
    return importlib.machinery.PathFinder.find_spec(name, list(above.submodule_search_locations))
