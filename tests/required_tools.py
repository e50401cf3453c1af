"""External tools some tests need (promtool, skopeo, umoci): skipped when absent on a
developer machine, a failure where CI_REQUIRE_TOOLS=1 (.ci/run installs them)."""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRED = os.environ.get("CI_REQUIRE_TOOLS") == "1"


def need(tool: str, install: str) -> str:
    path = shutil.which(tool)
    if path is None:
        message = f"{tool} not installed ({install})"
        if REQUIRED:
            pytest.fail(message + "; CI_REQUIRE_TOOLS=1")
        pytest.skip(message)
    return path
