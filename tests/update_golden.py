#!/usr/bin/env python3
"""Regenerate tests/golden/*.labels from the fixtures. Review the diff before committing:
a golden file is a claim about what the fixture's hardware must produce."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from nfd_gpu.labels.options import PROFILE_OPTIONS  # noqa: E402
from nfd_gpu.labels.registry import PROFILES  # noqa: E402
from nfd_gpu.scan import run_scan  # noqa: E402

VENDOR_PROFILES = [p for p in PROFILES if p != "neutral"]


def main() -> None:
    for root in sorted((HERE / "fixtures" / "sysfs").iterdir()):
        if not root.is_dir():
            continue
        labels = run_scan(root).labels
        text = "".join(f"{k}={labels[k]}\n" for k in sorted(labels))
        (HERE / "golden" / f"{root.name}.labels").write_text(text)
        print(f"{root.name}: {len(labels)} labels")
        for profile in VENDOR_PROFILES:
            out = HERE / "golden" / f"{root.name}.{profile}.labels"
            labels = run_scan(root, profiles=(profile,)).labels
            if labels:
                out.write_text("".join(f"{k}={labels[k]}\n" for k in sorted(labels)))
                print(f"{root.name} [{profile}]: {len(labels)} labels")
            elif out.exists():
                out.unlink()
        # every amd option that adds labels (amd-require-amdgpu and amd-no-<kind> only remove
        # them: tests/labels/test_profile_options.py, test_amd_labeller_oracle.py)
        amd_all = [
            o
            for o, (p, _) in PROFILE_OPTIONS.items()
            if p == "amd" and o != "amd-require-amdgpu" and not o.startswith("amd-no-")
        ]
        labels = run_scan(root, profiles=("amd",), profile_options=amd_all).labels
        out = HERE / "golden" / f"{root.name}.amd-all.labels"
        if labels:
            out.write_text("".join(f"{k}={labels[k]}\n" for k in sorted(labels)))
        elif out.exists():
            out.unlink()
    from tests.labels.nvidia_cases import OPTION_CASES

    out = HERE / "golden" / "nvidia" / "options"
    out.mkdir(parents=True, exist_ok=True)
    for case, (fixture, opts) in OPTION_CASES.items():
        nv = run_scan(HERE / "fixtures" / "sysfs" / fixture, profiles=["nvidia"],
                      nvidia_options=opts).labels  # fmt: skip
        (out / f"{case}.labels").write_text("".join(f"{k}={nv[k]}\n" for k in sorted(nv)))
        print(f"nvidia/options/{case}: {len(nv)} labels")


if __name__ == "__main__":
    main()
