"""pci.ids lookups from the host root: ``usr/share/misc``, ``usr/share/hwdata``, ``usr/share``.

Only the vendor blocks that are asked for are parsed, and only when a name is needed.
So a scan without unknown GPUs never reads the 1.3 MB file.
"""

from __future__ import annotations

from nfd_gpu.host import HostRoot

PCI_IDS_PATHS = ("usr/share/misc/pci.ids", "usr/share/hwdata/pci.ids", "usr/share/pci.ids")
MAX_PCI_IDS = 16 * 1024 * 1024


class PciIds:
    """Lazy reader of the host's pci.ids."""

    def __init__(self, host: HostRoot) -> None:
        self._host = host
        self._names: dict[str, dict[str, str]] | None = None
        self.path: str | None = None

    def _load(self) -> dict[str, dict[str, str]]:
        if self._names is not None:
            return self._names
        self._names = {}
        for rel in PCI_IDS_PATHS:
            # not recorded: nfd-gpu snapshot copies the first pci.ids itself
            data = self._host.read_bytes(rel, limit=MAX_PCI_IDS, record=False)
            if data is None:
                continue
            self.path = "/" + rel
            self._parse(data.decode("utf-8", "replace"))
            break
        return self._names

    def _parse(self, text: str) -> None:
        assert self._names is not None
        current: dict[str, str] | None = None
        for line in text.splitlines():
            if not line or line[0] == "#":
                continue
            if line[0] == "C" and line[1:2] == " ":
                break  # the device class section follows the vendor list
            if line[0] != "\t":
                vid = line.partition("  ")[0].strip().lower()
                current = self._names.setdefault(vid, {}) if len(vid) == 4 else None
                continue
            if current is None or line.startswith("\t\t"):
                continue
            did, _, name = line[1:].partition("  ")
            did = did.strip().lower()
            if len(did) == 4:
                current[did] = name.strip()

    def device_name(self, vendor: str, device: str) -> str | None:
        return self._load().get(vendor.lower(), {}).get(device.lower())


def marketing_part(name: str) -> str:
    """Cut ``GH100 [H100 SXM5 80GB]`` to ``H100 SXM5 80GB``; names without brackets unchanged."""
    if "[" in name and "]" in name:
        inner = name[name.rfind("[") + 1 : name.rfind("]")].strip()
        if inner:
            return inner
    return name.strip()
