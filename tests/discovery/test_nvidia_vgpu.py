"""NVIDIA vGPU guest detection: the PCI vendor-specific capability parser."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from nfd_gpu.discovery.nvidia import vgpu as nv
from nfd_gpu.host import HostRoot
from nfd_gpu.labels.nvidia import nvidia_labels
from nfd_gpu.scan import discover
from tests.conftest import fixture_root

CONFIG = fixture_root("nvidia-vgpu-guest") / "sys/bus/pci/devices/0000:00:05.0/config"


def vendor_capability(config: bytes) -> bytes | None:
    """The first vendor-specific capability of a whole config space (the walk over bytes)."""
    return nv.walk(lambda off, n: config[off : off + n])[1]


def test_fixture_capability() -> None:
    config = CONFIG.read_bytes()
    cap = vendor_capability(config)
    assert cap is not None and nv.is_vgpu(cap)
    assert nv.host_driver(cap) == ("550.54.16", "r550_40")


def test_short_or_plain_config_is_no_vgpu() -> None:
    config = CONFIG.read_bytes()
    assert vendor_capability(config[:64]) is None  # unprivileged read
    no_list = bytearray(config)
    no_list[6] = 0  # status: no capability list
    assert vendor_capability(bytes(no_list)) is None
    loop = bytearray(config)
    loop[0x69] = 0x60  # MSI -> PM -> MSI ...
    assert vendor_capability(bytes(loop)) is None
    not_vf = bytearray(config)
    not_vf[0xD4 + 3] = ord("X")
    assert not nv.is_vgpu(vendor_capability(bytes(not_vf)))


def test_records_are_skipped_to_the_host_driver_record() -> None:
    record = b"\x00\x16" + b"535.161.05" + b"r535_00\x00\x00\x00"
    cap = b"\x09\x00\x00VF" + b"\x07\x04ab" + record  # record 7 (4 bytes), then record 0
    assert nv.host_driver(cap) == ("535.161.05", "r535_00")
    assert nv.host_driver(b"\x09\x00\x00VF\x07\x00") is None  # zero-length record
    assert nv.host_driver(b"\x09\x00\x00VF\x00\x16550") is None  # truncated record


def test_guest_capability_is_a_typed_fact() -> None:
    snap = discover(HostRoot(fixture_root("nvidia-vgpu-guest")))
    facts = [
        (g.nvidia.vgpu_capability, g.mode, g.nvidia.vgpu_host_driver_version) for g in snap.gpus
    ]
    assert facts == [(True, "vgpu-guest", "550.54.16")]
    assert nvidia_labels(snap)["nvidia.com/vgpu.present"] == "true"


def test_short_config_file_means_no_labels(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "root"
    shutil.copytree(fixture_root("nvidia-vgpu-guest"), root, symlinks=True)
    cfg = root / "sys/devices/pci0000:00/0000:00:05.0/config"
    cfg.write_bytes(cfg.read_bytes()[:64])
    (root / "nvml.json").unlink()
    snap = discover(HostRoot(str(root)))
    assert [g.nvidia.vgpu_capability for g in snap.gpus] == [None]  # unknown, not absent
    labels = nvidia_labels(snap)
    assert not any(k.startswith("nvidia.com/vgpu.") for k in labels)
    assert not any("config" in w for w in snap.warnings)


def test_whole_config_without_capability_is_present_false(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "root"
    shutil.copytree(fixture_root("nvidia-vgpu-guest"), root, symlinks=True)
    cfg = root / "sys/devices/pci0000:00/0000:00:05.0/config"
    data = bytearray(cfg.read_bytes())
    data[0xD4 + 3 : 0xD4 + 5] = b"XX"
    cfg.write_bytes(bytes(data))
    (root / "nvml.json").unlink()
    snap = discover(HostRoot(str(root)))
    assert [(g.nvidia.vgpu_capability, g.mode) for g in snap.gpus] == [(False, "container")]
    labels = nvidia_labels(snap)
    assert labels["nvidia.com/vgpu.present"] == "false"
    assert "nvidia.com/vgpu.host-driver-version" not in labels


def test_nvml_vgpu_mode_alone_is_present(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "root"
    shutil.copytree(fixture_root("nvidia-vgpu-guest"), root, symlinks=True)
    (root / "sys/devices/pci0000:00/0000:00:05.0/config").unlink()
    labels = nvidia_labels(discover(HostRoot(str(root))))
    assert labels["nvidia.com/vgpu.present"] == "true"
    assert "nvidia.com/vgpu.host-driver-version" not in labels


@given(st.binary(max_size=4096))
def test_capability_parser_never_raises(data: bytes) -> None:
    cap = vendor_capability(data)
    if cap is not None:
        nv.host_driver(cap)
    nv.host_driver(data)
    nv.is_vgpu(data)


@given(
    st.binary(min_size=256, max_size=256),
    st.integers(0x40, 0xFC),
    st.binary(max_size=64),
)
def test_capability_parser_on_a_listed_capability(base: bytes, at: int, tail: bytes) -> None:
    c = bytearray(base)
    c[6] |= 0x10
    c[0x34] = at
    cap = b"\x09\x00" + bytes([min(255, 5 + len(tail))]) + b"VF" + tail
    c[at : at + len(cap)] = cap
    c = c[:256]
    found = vendor_capability(bytes(c))
    assert found is not None
    info = nv.host_driver(found)
    assert info is None or all(len(x) <= 10 for x in info)


def test_capability_read_by_the_bytes_it_needs_once_per_device(tmp_path: Path) -> None:
    """The vGPU capability costs a few config bytes, not the 4 KiB file; nothing on the next
    pass."""
    import shutil

    reads: list[int] = []

    class Counting(HostRoot):
        def read_at(self, rel: str, offset: int, size: int) -> bytes | None:
            data = super().read_at(rel, offset, size)
            reads.append(len(data or b""))
            return data

    for name in ("nvidia-vgpu-guest", "h200-vm"):
        root = tmp_path / name
        shutil.copytree(fixture_root(name), root, symlinks=True)
        reads.clear()

        whole = discover(Counting(root))
        assert 0 < sum(reads) < 128, reads  # the file is 4096 bytes
        reads.clear()
        assert discover(Counting(root)) == whole
        assert reads == []  # cached per device identity
        # the file changes (another device): read again
        cfg = root / "sys/bus/pci/devices" / whole.gpus[0].address / "config"
        data = cfg.read_bytes()
        cfg.unlink()
        cfg.write_bytes(data)
        discover(Counting(root))
        assert reads
    assert nv._CAP_CACHE
