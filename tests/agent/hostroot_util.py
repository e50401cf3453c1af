"""Copy a fixture host root and add a GPU to it, in real sysfs shape."""

from __future__ import annotations

import os
import shutil

FIXTURES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "sysfs"
)


def copy_fixture(name: str, dest: str) -> str:
    shutil.copytree(os.path.join(FIXTURES, name), dest, symlinks=True)
    return dest


def add_gpu(root: str, like: str, new_bdf: str) -> None:
    """Clone PCI function ``like`` (e.g. ``0000:18:00.0``) as ``new_bdf`` on a new host bridge:
    device directory, ``bus/pci/devices`` link and driver link, like a hot-plugged GPU."""
    sys_dir = os.path.join(root, "sys")
    src = os.path.realpath(os.path.join(sys_dir, "bus", "pci", "devices", like))
    bridge = "pci" + new_bdf[:7]
    dst = os.path.join(sys_dir, "devices", bridge, new_bdf)
    shutil.copytree(src, dst, symlinks=True)
    os.symlink(
        f"../../../devices/{bridge}/{new_bdf}",
        os.path.join(sys_dir, "bus", "pci", "devices", new_bdf),
    )
    drv = os.path.join(src, "driver")
    if os.path.islink(drv):
        name = os.path.basename(os.readlink(drv))
        os.symlink(
            f"../../../../devices/{bridge}/{new_bdf}",
            os.path.join(sys_dir, "bus", "pci", "drivers", name, new_bdf),
        )


def remove_gpu(root: str, bdf: str) -> None:
    sys_dir = os.path.join(root, "sys")
    for drv in os.listdir(os.path.join(sys_dir, "bus", "pci", "drivers")):
        link = os.path.join(sys_dir, "bus", "pci", "drivers", drv, bdf)
        if os.path.islink(link):
            os.unlink(link)
    os.unlink(os.path.join(sys_dir, "bus", "pci", "devices", bdf))
    shutil.rmtree(os.path.join(sys_dir, "devices", "pci" + bdf[:7], bdf))
