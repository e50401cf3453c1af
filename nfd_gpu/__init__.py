"""nfd-gpu: GPU feature discovery for Kubernetes Node Feature Discovery."""

from __future__ import annotations

__version__ = "0.1.0"
