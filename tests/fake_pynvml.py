"""Write an importable ``pynvml.py`` that answers from a recording (no GPU here).

The module is a real file on ``sys.path``: ``import pynvml`` in a subprocess finds it the way
it finds nvidia-ml-py on a GPU node. Its answers are the recorded NVML answers replayed by
``nfd_gpu.discovery.nvidia.replay``. With ``outage`` (a path), while that file exists
``nvmlInit`` raises ``DriverNotLoaded`` and every other NVML call ``Unknown``: NVML going
away under a running agent (driver reload, library gone from the container).
``write_unimportable`` writes a ``pynvml.py`` whose import fails (nvidia-ml-py missing).

Beside the module, ``libnvidia-ml.so.1`` stands in for the driver's NVML library (a link
to this process's libc: it opens, nothing in it is called): nfd-gpu asks NVML only where
that library opens, as nvidia-ml-py's ``nvmlInit`` does first. A process finds it with
``LD_LIBRARY_PATH`` set to the directory (:func:`library_env`).
"""

from __future__ import annotations

from pathlib import Path

TEMPLATE = '''"""Fake pynvml: recorded NVML answers (tests/fake_pynvml.py)."""
import json as _json
import os as _os

from nfd_gpu.discovery.nvidia import replay as _replay

with open({recording!r}, encoding="utf-8") as _f:
    _MOD = _replay.build(_json.load(_f))
_OUTAGE = {outage!r}


def _down():
    return _OUTAGE is not None and _os.path.exists(_OUTAGE)


def _wrap(name, fn):
    def call(*args, **kwargs):
        if _down():
            err = "DriverNotLoaded" if name == "nvmlInit" else "Unknown"
            raise _replay.ERROR_CLASSES[err](0)
        return fn(*args, **kwargs)

    call.__name__ = name
    return call


for _name, _value in vars(_MOD).items():
    if _name.startswith("__"):
        continue
    if _name.startswith("nvml") and callable(_value):
        _value = _wrap(_name, _value)
    globals()[_name] = _value
'''


def write_fake_pynvml(directory: Path, recording: Path, outage: Path | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    text = TEMPLATE.format(
        recording=str(recording), outage=str(outage) if outage is not None else None
    )
    (directory / "pynvml.py").write_text(text)
    nvml = directory / "libnvidia-ml.so.1"
    if not nvml.is_symlink():
        nvml.symlink_to(_libc())
    return directory


def _libc() -> str:
    """The C library this process runs with (any library that opens would do)."""
    with open("/proc/self/maps", encoding="utf-8") as f:
        for line in f:
            path = line.split()[-1]
            if "/libc.so" in path or "/libc-" in path:
                return path
    raise RuntimeError("no libc in /proc/self/maps")


def library_env(directory: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` with ``directory`` (a fake pynvml's) first on ``LD_LIBRARY_PATH``."""
    paths = [str(directory), *filter(None, env.get("LD_LIBRARY_PATH", "").split(":"))]
    return {**env, "LD_LIBRARY_PATH": ":".join(paths)}


def write_unimportable(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pynvml.py").write_text('raise ImportError("nvidia-ml-py not installed")\n')
    return directory
