"""Write the GPU vendor enum of nfd_gpu/data/scan-v1.schema.json from the vendor registry.

The enum is ``Vendor.name`` of each entry of ``nfd_gpu.discovery.registry.VENDORS``, in
order; the rest of the schema is written by hand.

    python scripts/scan_schema.py          # rewrite the schema
    python scripts/scan_schema.py --check  # exit 1 if it is out of date (tests run this)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from generated_doc import write_or_check  # scripts/generated_doc.py, beside this script

from nfd_gpu.discovery.registry import VENDORS
from nfd_gpu.discovery.source import Vendor

SCHEMA = Path(__file__).resolve().parents[1] / "nfd_gpu" / "data" / "scan-v1.schema.json"


def schema(vendors: Iterable[Vendor] = VENDORS) -> dict[str, Any]:
    """The shipped schema with its vendor enum naming ``vendors``."""
    doc: dict[str, Any] = json.loads(SCHEMA.read_text(encoding="utf-8"))
    doc["$defs"]["gpu"]["properties"]["vendor"] = {"enum": [v.name for v in vendors]}
    return doc


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2) + "\n"


if __name__ == "__main__":
    want = render(schema())
    sys.exit(write_or_check(SCHEMA, want, sys.argv[1:], "python scripts/scan_schema.py"))
