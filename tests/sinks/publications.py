"""A GPU publication and a settable clock for the NodeFeature sink tests (the fake API
server's in tests/sinks and the real one's in tests/e2e)."""

from __future__ import annotations

from typing import Any

from nfd_gpu.sinks import Publication


def pub(count: int = 8) -> Publication:
    features: dict[str, dict[str, Any]] = {
        "flags": {"gpu.capability": {"elements": {"mig": {}}}},
        "attributes": {"gpu.node": {"elements": {"count": str(count)}}},
        "instances": {
            "gpu.device": {
                "elements": [
                    {"attributes": {"index": str(i), "vendor": "10de"}} for i in range(count)
                ]
            }
        },
    }
    return Publication(
        labels={
            "gpu.feature.node.kubernetes.io/present": "true",
            "gpu.feature.node.kubernetes.io/count": str(count),
        },
        features=features,
    )


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t
