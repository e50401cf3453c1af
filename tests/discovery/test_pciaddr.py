"""The one PCI address type (nfd_gpu/discovery/pciaddr.py): every source's spelling of an
address names the same function, whatever the domain width or case."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nfd_gpu.discovery.pciaddr import PciAddress, canonical


def test_every_source_spelling_is_the_same_function() -> None:
    # sysfs / procfs (kernel "%04x"), NVML busId ("%08X"), lspci without -D, any case
    spellings = ["0000:18:00.0", "00000000:18:00.0", "0000:18:00.0\n", "18:00.0", "0000:18:0.0"]
    assert {PciAddress.parse(s) for s in spellings} == {PciAddress(0, 0x18, 0, 0)}
    assert canonical("00000000:AF:00.0") == "0000:af:00.0"


def test_wide_domains_are_kept_whole() -> None:
    """Hyper-V / Azure 32-bit domains (NVIDIA/nvidia-docker#1316): NVML prints
    03F8CFDD:00:00.0, the kernel names the function 3f8cfdd:00:00.0; cutting the domain
    to four digits (cfdd) would name another function."""
    nvml = PciAddress.parse("03F8CFDD:00:00.0")
    assert nvml == PciAddress.parse("3f8cfdd:00:00.0") == PciAddress(0x3F8CFDD, 0, 0, 0)
    assert str(nvml) == "3f8cfdd:00:00.0"
    assert PciAddress.parse("cfdd:00:00.0") != nvml
    assert canonical("0001:00:00.0") == "0001:00:00.0"


def test_not_addresses() -> None:
    for junk in (
        "",
        None,
        "gpu0",
        "0000:18:00",
        "0000:18:00.8",
        "0000:18:20.0",
        "123456789:00:00.0",
    ):
        assert PciAddress.parse(junk) is None, junk


def test_kfd_location() -> None:
    assert str(PciAddress.from_kfd(0, 25344)) == "0000:63:00.0"
    assert str(PciAddress.from_kfd(0x3F8CFDD, 1287)) == "3f8cfdd:05:00.7"


@given(st.integers(0, 2**32 - 1), st.integers(0, 255), st.integers(0, 31), st.integers(0, 7))
def test_round_trip(dom: int, bus: int, dev: int, fn: int) -> None:
    a = PciAddress(dom, bus, dev, fn)
    assert PciAddress.parse(str(a)) == a
    assert PciAddress.parse(f"{dom:08X}:{bus:02X}:{dev:02X}.{fn}") == a  # NVML's form


@given(st.text(max_size=40))
def test_parse_total(text: str) -> None:
    a = PciAddress.parse(text)
    assert a is None or PciAddress.parse(str(a)) == a
