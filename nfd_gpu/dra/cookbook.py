"""The CEL cookbook: per neutral label, the selector that picks the same devices per DRA driver.

- Where there is none, the cookbook says why.
- docs/dra.md is generated from it.
- Kubernetes' own DRA CEL compiler evaluates every recipe on the preview devices of every
  fixture. See tests/dra/test_cookbook.py and the ``dra-cel`` judge of tests/e2e/build.sh.

How a :class:`Recipe` is checked, for each device ``d`` with a ``value``:

- the selector for that value must match exactly the devices ``e`` of the driver with
  ``promise(d, e)``;
- those are the devices carrying what ``d``'s label says: the same family, at least its
  memory, ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from nfd_gpu.dra.preview import DRIVERS, Device
from nfd_gpu.names import sanitize_value

NV, AMD, INTEL = DRIVERS["nvidia"], DRIVERS["amd"], DRIVERS["intel"]


@dataclass(frozen=True)
class Recipe:
    key: str  # the neutral label (docs/labels.md key, ``G/`` left out)
    driver: str
    selector: Callable[[str], str]  # the CEL for a value in the driver's terms
    value: Callable[[Device], str | None]  # that value of a device, from nfd-gpu's facts
    promise: Callable[[Device, Device], bool]  # e carries what d's label says
    example: str  # a value for the docs
    note: str = ""


def _attr(driver: str, name: str) -> str:
    return f"device.attributes['{driver}'].{name}"


def _gpu_attr(d: Device, name: str) -> str | None:
    v = d.attributes.get(name)
    return None if v is None else str(next(iter(v.values())))


def _product(d: Device) -> str:
    return sanitize_value(d.gpu.product or "") if d.gpu else ""


def _mem(d: Device) -> int:
    if "memory" not in d.capacity:
        return 0
    if d.partition is not None:
        return d.partition.memory_mib or 0
    return (d.gpu.memory_mib or 0) if d.gpu else 0


def _cu(d: Device) -> int:
    if d.partition is not None:
        return d.partition.compute_units or 0
    return (d.gpu.compute_units or 0) if d.gpu else 0


def _cc(d: Device) -> tuple[int, int]:
    g = d.gpu.nvidia if d.gpu else None
    return (g.compute_major or 0, g.compute_minor or 0) if g else (0, 0)


def _major(d: Device) -> str | None:
    v = _gpu_attr(d, "driverVersion")
    return v.split(".")[0] if v else None


def _same(f: Callable[[Device], object]) -> Callable[[Device, Device], bool]:
    return lambda a, b: f(a) == f(b)


def _type(d: Device) -> str | None:
    return _gpu_attr(d, "type")


def _common(driver: str) -> list[Recipe]:
    """What every driver's devices answer alike."""
    return [
        Recipe(
            "vendor",
            driver,
            lambda v: f"device.driver == '{v}'",
            lambda d: d.driver,
            lambda a, b: True,
            driver,
            "the label's `nvidia`/`amd`/`intel` is the driver's domain",
        ),
        Recipe(
            "memory-mib",
            driver,
            lambda v: (
                "'memory' in device.capacity[device.driver] && "
                f"device.capacity[device.driver].memory.compareTo(quantity('{v}Mi')) >= 0"
            ),
            lambda d: str(_mem(d)) if _mem(d) else None,
            lambda a, b: _mem(b) >= _mem(a),
            "81559",
            "the label is the node's smallest GPU (`Gt`); a device's capacity is its own "
            "(a MIG device's or a partition's memory, not the GPU's); without the `in` test "
            "a device with no `memory` (NVIDIA's `vfio` type) fails the whole claim",
        ),
        Recipe(
            f"{'amd' if driver == AMD else 'nvidia'}.driver.major",
            driver,
            lambda v: f"{_attr(driver, 'driverVersion')}.compareTo(semver('{v}.0.0')) >= 0",
            _major,
            lambda a, b: True,
            "550" if driver == NV else "6",
            "`driverVersion` is a version: compare with `semver()`, never as a string",
        ),
    ]


RECIPES: tuple[Recipe, ...] = (
    *_common(NV)[:2],
    Recipe(
        "product",
        NV,
        lambda v: f"{_attr(NV, 'productName')} == '{v}'",
        lambda d: _gpu_attr(d, "productName"),
        _same(_product),
        "NVIDIA H100 80GB HBM3",
        "NVML's name (the `gpu.device` feature's `product`, `nvidia-smi --query-gpu=name`), "
        "not the sanitised label value `NVIDIA-H100-80GB-HBM3`",
    ),
    Recipe(
        "family",
        NV,
        lambda v: f"{_attr(NV, 'architecture')} == '{v}'",
        lambda d: _gpu_attr(d, "architecture"),
        _same(lambda d: d.gpu.family if d.gpu else None),
        "Hopper",
        "go-nvlib's capitalised name: `hopper` is `Hopper`, `ada-lovelace` is `Ada Lovelace`",
    ),
    Recipe(
        "compute.major",
        NV,
        lambda v: f"{_attr(NV, 'cudaComputeCapability')}.compareTo(semver('{v}')) >= 0",
        lambda d: _gpu_attr(d, "cudaComputeCapability"),
        lambda a, b: _cc(b) >= _cc(a),
        "9.0.0",
        "major and minor in one version (`compute.minor` the same selector)",
    ),
    _common(NV)[2],
    Recipe(
        "mig.<profile>.count",
        NV,
        lambda v: f"{_attr(NV, 'type')} == 'mig' && {_attr(NV, 'profile')} == '{v}'",
        lambda d: d.partition.profile if d.partition else None,
        lambda a, b: (
            b.partition is not None
            and a.partition is not None
            and b.partition.profile == a.partition.profile
        ),
        "1g.10gb",
        "a MIG device is a device of its own (type `mig`); `mig.enabled` is "
        f"`{_attr(NV, 'type')} == 'mig'`",
    ),
    Recipe(
        "mode",
        NV,
        lambda v: f"{_attr(NV, 'type')} == '{v}'",
        lambda d: "vfio" if _type(d) == "vfio" else None,
        lambda a, b: _type(b) == "vfio",
        "vfio",
        "`pf-passthrough`: NVIDIA's driver publishes GPUs on vfio-pci as type `vfio` "
        "(its passthrough support, behind a feature gate)",
    ),
    *_common(AMD),
    Recipe(
        "product",
        AMD,
        lambda v: f"{_attr(AMD, 'productName')} == '{v}'",
        lambda d: _gpu_attr(d, "productName"),
        _same(_product),
        "AMD_Instinct_MI300X_OAM",
        "sysfs `product_name` with underscores, which may name the form factor (`_OAM`); "
        "the label is the table's name, sanitised",
    ),
    Recipe(
        "compute-units",
        AMD,
        lambda v: f"device.capacity['{AMD}'].computeUnits.compareTo(quantity('{v}')) >= 0",
        lambda d: str(_cu(d)) if _cu(d) else None,
        lambda a, b: _cu(b) >= _cu(a),
        "104",
        "per partition in partition mode",
    ),
    Recipe(
        "partition.compute",
        AMD,
        lambda v: f"{_attr(AMD, 'partitionProfile')}.startsWith('{v}_')",
        lambda d: d.gpu.amd.partition_compute if d.gpu and d.partition else None,
        lambda a, b: (
            b.partition is not None
            and b.gpu is not None
            and a.gpu is not None
            and b.gpu.amd.partition_compute == a.gpu.amd.partition_compute
        ),
        "cpx",
        "`partitionProfile` is `<compute>_<memory>` (`cpx_nps4`); `partition.memory` is "
        "`.endsWith('_nps4')`",
    ),
    *_common(INTEL)[:2],
    Recipe(
        "driver",
        INTEL,
        lambda v: f"{_attr(INTEL, 'driver')} == '{v}'",
        lambda d: d.gpu.driver if d.gpu else None,
        _same(lambda d: d.gpu.driver if d.gpu else None),
        "xe",
        "NVIDIA's and AMD's drivers publish only GPUs on their own kernel driver",
    ),
    Recipe(
        "product",
        INTEL,
        lambda v: f"{_attr(INTEL, 'pciId')} == '{v}'",
        lambda d: _gpu_attr(d, "pciId"),
        _same(_product),
        "0x56a0",
        "Intel's `model` comes from Intel's own table (`A770`): the PCI device id is the "
        "stable key; a product with several ids needs `in [...]`",
    ),
    Recipe(
        "health",
        INTEL,
        lambda v: f"{_attr(INTEL, 'health')} == '{v}'",
        lambda d: _gpu_attr(d, "health"),
        _same(lambda d: _gpu_attr(d, "health")),
        "Healthy",
        "`Healthy`/`Unhealthy`/`Unknown` per device; NVIDIA's driver drops unhealthy "
        "devices (and taints them), AMD's publishes no health",
    ),
)


# One recipe with one device's value: ("<key> (<driver>) for <device>", the dra-cel
# judge's input {driver, devices, expressions}, the names of the devices promised, sorted)
Check = tuple[str, dict[str, object], tuple[str, ...]]


def checks(devs: Sequence[Device]) -> Iterator[Check]:
    """Return every recipe with every value ``devs`` has; ``devs`` is one node's devices.

    The selector must match exactly the devices of the same DeviceClass that carry what the
    label says.
    """
    for recipe in RECIPES:
        for d in devs:
            value = recipe.value(d) if d.driver == recipe.driver else None
            if value is None:
                continue
            mine = [e for e in devs if e.device_class == d.device_class]
            yield (
                f"{recipe.key} ({recipe.driver}) for {d.name}",
                {
                    "driver": recipe.driver,
                    "devices": [e.api() for e in mine],
                    "expressions": [recipe.selector(value)],
                },
                tuple(sorted(e.name for e in mine if recipe.promise(d, e))),
            )


# The neutral labels with no device selector, and why (docs/labels.md's other keys).
NO_SELECTOR = {
    "present": "every published device is a GPU: a claim that gets a device has one",
    "count": "a claim asks for a count (`count: 4`, `allocationMode: All`), not a node",
    "<vendor>.count": "as `count`, with the vendor's DeviceClass",
    "product.<product>.count": "as `count`, with the product selector",
    "compute.minor": "in `cudaComputeCapability` (see `compute.major`)",
    "amd.gfx": "no ISA attribute in AMD's slices: select by `productName` or `deviceID`",
    "<vendor>.driver.version": "see `<vendor>.driver.major`: `driverVersion`",
    "virtualization": "a node fact: node affinity",
    "mig.capable": "no attribute: MIG-capable GPUs are type `gpu` until MIG is on",
    "mig.enabled": "see `mig.<profile>.count`",
    "partitions": "each partition is a device: count them in the claim",
    "nvidia.cuda.major": "`cudaDriverVersion` is a version: `.compareTo(semver('12.4.0'))`",
    "nvidia.cuda.minor": "as `nvidia.cuda.major`",
    "sriov.capable": "Intel's `sriov` bool; no attribute in NVIDIA's or AMD's slices",
    "sriov.vfs": "a node fact: node affinity",
    "interconnect.nvswitch": "NVIDIA's `gpuModuleID`/fabric attributes, not a plain flag",
    "interconnect.xgmi": "no attribute: node affinity",
    "interconnect.xelink": "no attribute: node affinity",
    "partition.memory": "see `partition.compute`",
    "pcie.gen": "no attribute: node affinity",
    "pcie.width": "no attribute: node affinity",
    "pcie.degraded": "no attribute: node affinity",
    "machine": "a node fact: node affinity",
    "devices.ready": "the driver publishes only devices it can prepare",
    "runtime.nvidia-container-toolkit": "a node fact (the drivers use CDI): node affinity",
    "runtime.cdi": "a node fact: node affinity",
    "runtime.cdi.<vendor>": "a node fact: node affinity",
    "runtime.rocm.version": "a node fact: node affinity",
    "runtime.rocm.major": "a node fact: node affinity",
    "runtime.opencl": "a node fact: node affinity",
    "runtime.opencl.<icd>": "a node fact: node affinity",
    "runtime.level-zero": "a node fact: node affinity",
    "health.failed.count": "see `health`",
    "health.degraded.count": "see `health`",
    "health.lost.count": "a lost GPU is in no slice",
    "health.no-driver.count": "a GPU without its driver is in no driver's slice",
    "health.all-failed": "a node fact (the taint rule's): node affinity or the taint",
    "integrated": "no attribute in the drivers' slices (dra-attributes.md): node affinity",
    "nvidia.l4t.version": "a node fact (the L4T release): node affinity",
    "nvidia.l4t.major": "as `nvidia.l4t.version`",
}

# A label some drivers answer and others not: why not (the docs' cells)
NOT_THIS_DRIVER = {
    ("family", AMD): "AMD's `family` is libdrm's (`AI`), not the ISA family: `productName`",
    ("family", INTEL): "Intel's `family` is a marketing series (`Arc A-Series`): `pciId`",
    ("compute.major", AMD): "NVIDIA's compute capability only",
    ("compute.major", INTEL): "NVIDIA's compute capability only",
    ("compute-units", NV): "no SM count in NVIDIA's slices (MIG: `multiprocessors`)",
    ("compute-units", INTEL): "`millicores`, not Xe cores",
    ("driver", NV): "only GPUs on `nvidia` (`vfio`: see `mode`)",
    ("driver", AMD): "only GPUs on `amdgpu`",
    ("mode", AMD): "only GPUs on `amdgpu` (`container`)",
    ("mode", INTEL): "type `gpu` or `vf`",
    ("health", NV): "unhealthy devices are dropped from the slice",
    ("health", AMD): "no health in AMD's slices",
    ("partition.compute", NV): "MIG: see `mig.<profile>.count`",
    ("partition.compute", INTEL): "no partitions",
}
