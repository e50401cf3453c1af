"""The one PCI address type: every source's address is parsed into a :class:`PciAddress`.

- Sources: sysfs names, procfs, NVML ``busId`` and ``busIdLegacy``,
  KFD ``domain`` + ``location_id``, DRM links.
- Addresses are compared as numbers, never as text.

The sources write the same function differently:

* sysfs, from the kernel's ``drivers/pci/probe.c``: ``"%04x:%02x:%02x.%d"``.
* The NVIDIA driver's procfs: ``"%04x:%02x:%02x.%x"``.
* Both are lower case, the domain *at least* four digits.
  So a 32-bit Hyper-V or Azure domain prints in full: ``3f8cfdd:00:00.0``.
* NVML ``busId``: ``"%08X:%02X:%02X.0"``, upper case, eight domain digits:
  ``03F8CFDD:00:00.0``. ``busIdLegacy`` has four.
* KFD: the domain and ``location_id`` as decimal numbers.

Cutting a domain to four digits makes the facts of such a VM match no function.
``nvidia-container-cli`` once did that: NVIDIA/nvidia-docker#1316.
The text form of an address, :meth:`PciAddress.__str__`, is the kernel's.
So it names the sysfs directory.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# domain (optional, 1-8 hex digits) : bus (1-2) : device (1-2) . function (0-7)
_ADDR = re.compile(
    r"^(?:(?P<dom>[0-9a-f]{1,8}):)?(?P<bus>[0-9a-f]{1,2}):(?P<dev>[0-9a-f]{1,2})\.(?P<fn>[0-7])$"
)
MAX_DEVICE = 0x1F  # 5 bits of devfn


class PciAddress(NamedTuple):
    """A PCI function address: domain of 32 bits, bus, device or slot, function.

    - Immutable, hashed, ordered and compared as the tuple of the four numbers.
    - A ``NamedTuple``: it is made at import in a tenth of the time of a frozen, ordered
      dataclass's compiled methods (~0.1 ms, not ~1.4).
    """

    domain: int
    bus: int
    device: int
    function: int

    @classmethod
    def parse(cls, text: str | None) -> PciAddress | None:
        """Parse any source's address text; None when it is not one.

        Any case and any domain width up to 8 digits are accepted.
        The domain is optional, as in ``lspci`` without ``-D``.
        """
        if not text:
            return None
        m = _ADDR.match(text.strip().lower())
        if m is None:
            return None
        device = int(m.group("dev"), 16)
        if device > MAX_DEVICE:
            return None
        return cls(
            int(m.group("dom") or "0", 16), int(m.group("bus"), 16), device, int(m.group("fn"))
        )

    @classmethod
    def from_kfd(cls, domain: int, location_id: int) -> PciAddress:
        """Build a KFD node's address: ``location_id`` holds bus, device and function.

        The bits are 8-15 for the bus, 3-7 for the device and 0-2 for the function.
        """
        loc = location_id & 0xFFFF
        return cls(domain & 0xFFFFFFFF, loc >> 8, (loc >> 3) & MAX_DEVICE, loc & 0x7)

    @property
    def slot(self) -> tuple[int, int, int]:
        """Return domain, bus and device: the functions of one card share it."""
        return self.domain, self.bus, self.device

    def __str__(self) -> str:
        return f"{self.domain:04x}:{self.bus:02x}:{self.device:02x}.{self.function:x}"


def canonical(text: str | None) -> str | None:
    """Return the sysfs text of any source's address; None when ``text`` is not an address.

    Example: ``03F8CFDD:00:00.0`` -> ``3f8cfdd:00:00.0``.
    """
    addr = PciAddress.parse(text)
    return str(addr) if addr is not None else None
