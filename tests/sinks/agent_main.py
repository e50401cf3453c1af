"""Run ``nfd-gpu`` (``nfd_gpu.cli``) as a subprocess for the agent tests.

Uses the real ``nfd_gpu.scan`` when it exists, else (or with NFD_GPU_TEST_FAKE_SCAN=1)
the stand-in from fake_scan.py.
"""

from __future__ import annotations

import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if os.environ.get("NFD_GPU_TEST_FAKE_SCAN") == "1":
    use_fake = True
else:
    try:
        importlib.import_module("nfd_gpu.scan")
        use_fake = False
    except ImportError:
        use_fake = True
if use_fake:
    import fake_scan

    sys.modules["nfd_gpu.scan"] = fake_scan

from nfd_gpu.cli import main

if __name__ == "__main__":
    sys.exit(main())
