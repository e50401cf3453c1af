"""Write the enums of the chart's deploy/helm/nfd-gpu/values.schema.json from the registries.

``outputs`` from ``nfd_gpu.sinks.registry.OUTPUTS`` (a deprecated output is not offered to a
pod) and ``profiles`` from ``nfd_gpu.labels.registry.PROFILES``, in the registries' order;
``profileOptions`` from ``nfd_gpu.labels.options.PROFILE_OPTIONS`` and the ``config`` file's
keys from ``nfd_gpu.config.settings.SETTINGS``, sorted. The rest of the schema is written by
hand.

    python scripts/chart_schema.py          # rewrite the schema
    python scripts/chart_schema.py --check  # exit 1 if it is out of date (tests run this)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from generated_doc import write_or_check  # scripts/generated_doc.py, beside this script

from nfd_gpu.config.settings import SETTINGS
from nfd_gpu.labels.options import PROFILE_OPTIONS
from nfd_gpu.labels.registry import PROFILES
from nfd_gpu.sinks.registry import OUTPUTS

SCHEMA = Path(__file__).resolve().parents[1] / "deploy" / "helm" / "nfd-gpu" / "values.schema.json"


def schema() -> dict[str, Any]:
    """The shipped schema with its enums written from the registries."""
    doc: dict[str, Any] = json.loads(SCHEMA.read_text(encoding="utf-8"))
    props = doc["properties"]
    props["outputs"]["items"]["enum"] = [n for n, o in OUTPUTS.items() if not o.deprecated]
    props["profiles"]["items"]["enum"] = list(PROFILES)
    props["profileOptions"]["items"]["enum"] = sorted(PROFILE_OPTIONS)
    props["config"]["propertyNames"]["enum"] = sorted(SETTINGS)
    return doc


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2) + "\n"


if __name__ == "__main__":
    want = render(schema())
    sys.exit(write_or_check(SCHEMA, want, sys.argv[1:], "python scripts/chart_schema.py"))
