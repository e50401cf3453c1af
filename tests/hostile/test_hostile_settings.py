"""Settings out of range and hostile downward-API names:
every number has bounds declared once (nfd_gpu/config/settings.py) and checked when the
configuration is validated, the range in the message; NODE_NAME, POD_NAMESPACE,
POD_NAME and POD_UID are validated as Kubernetes names; a log line never carries a raw
newline (log forging)."""

from __future__ import annotations

import logging
import math
import subprocess
from pathlib import Path

import pytest

from nfd_gpu.agent.logs import TextFormatter
from nfd_gpu.config.loader import ConfigError
from nfd_gpu.config.loader import load as load_config
from nfd_gpu.config.settings import KINDS, OBJECT_PREFIX, SETTINGS, default
from tests.memory import run_cli_with_peak

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"
NUMBERS = sorted(k for k, kind in KINDS.items() if kind == "float")


def test_every_number_has_bounds_that_hold_its_default() -> None:
    for key in NUMBERS:
        bounds = SETTINGS[key].bounds
        assert bounds is not None, key
        assert bounds[0] <= default(key) <= bounds[1], key
        # a wait of the highest value must not overflow threading's timer
        import threading

        assert bounds[1] < threading.TIMEOUT_MAX, key


def _bad_values(key: str) -> list[float]:
    low, high = SETTINGS[key].bounds or (0.0, 0.0)
    return [low - 0.05 if low else -1.0, high * 2, 1e10, math.inf, math.nan]


@pytest.mark.parametrize("key", NUMBERS)
def test_out_of_range_numbers_are_refused_with_the_range(key: str) -> None:
    low, high = SETTINGS[key].bounds or (0.0, 0.0)
    for value in _bad_values(key):
        flags = {key: value}
        if key == "expiry":
            flags["oneshot"] = True  # the "twice the interval" rule aside
        with pytest.raises(ConfigError) as e:
            load_config(env={}, flags=flags)
        assert str(e.value) == (
            f"configuration: {key} must be from {low:g} to {high:g} {SETTINGS[key].unit}, "
            f"got {value:g}"
        )


def test_bounds_are_inclusive() -> None:
    for key in NUMBERS:
        low, high = SETTINGS[key].bounds or (0.0, 0.0)
        for value in (low, high):
            flags = {key: value, "oneshot": True}
            assert getattr(load_config(env={}, flags=flags), key) == value


def test_interval_1e10_is_refused_before_the_first_pass(tmp_path: Path) -> None:
    """Was accepted (with an expiry of at least twice that); the timer raised OverflowError
    after the first pass (a crash loop)."""
    p, _ = run_cli_with_peak(
        ["run", "--no-udev", "--interval", "1e10", "--expiry", "3e10",
         "--root", str(FIXTURES / "hgx-h100"), "--features-dir", str(tmp_path)],
        timeout=20,
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert p.stderr == (
        "nfd-gpu: error: configuration: interval must be from 0.1 to 86400 seconds, got 1e+10\n"
    )
    assert list(tmp_path.iterdir()) == []


BAD_NAMES = ["a/b", "../x", "x" * 300, "node\nFORGED 2026 INFO nfd_gpu.agent: ok", "Node_A", ""]


@pytest.mark.parametrize(
    ("var", "key"),
    [("NODE_NAME", "node_name"), ("POD_NAMESPACE", "namespace"), ("POD_NAME", "pod_name")],
)
@pytest.mark.parametrize("value", BAD_NAMES[:-1])
def test_downward_api_names_are_validated(var: str, key: str, value: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(env={var: value})
    msg = str(e.value)
    assert msg.startswith(f"configuration: {key} {value!r} is not a lower-case DNS-1123 ")
    assert "\n" not in msg


def test_pod_uid_is_validated() -> None:
    assert load_config(env={"POD_UID": "1f0e3c8a-5d2b-4c6e-9a7f-0b1c2d3e4f50"}).pod_uid
    with pytest.raises(ConfigError, match="pod_uid 'a\\\\nb' is not"):
        load_config(env={"POD_UID": "a\nb"})


def test_names_at_their_limits_are_accepted() -> None:
    node = ".".join(["a" * 63] * 3) + "." + "b" * 53  # 245 = 253 - len("nfd-gpu-")
    cfg = load_config(env={"NODE_NAME": node, "POD_NAMESPACE": "n" * 63})
    assert cfg.node_name == node and len(OBJECT_PREFIX + cfg.node_name) == 253  # its object
    with pytest.raises(ConfigError, match="at most 245 characters"):
        load_config(env={"NODE_NAME": node + "b"})
    with pytest.raises(ConfigError, match="namespace"):
        load_config(env={"POD_NAMESPACE": "n" * 64})


def test_text_log_lines_carry_no_raw_newline() -> None:
    fmt = TextFormatter("%(levelname)s %(name)s: %(message)s")
    rec = logging.LogRecord(
        "nfd_gpu.agent", logging.WARNING, __file__, 1, "sharing config ignored: %s",
        ("/x\nINFO nfd_gpu.agent: published 0 labels\r\x1b[2K",), None,
    )  # fmt: skip
    line = fmt.format(rec)
    assert line == (
        "WARNING nfd_gpu.agent: sharing config ignored: "
        "/x\\nINFO nfd_gpu.agent: published 0 labels\\r\\x1b[2K"
    )


def test_agent_log_of_a_newline_path_is_one_line(tmp_path: Path) -> None:
    """A path with a newline (here the sharing config's) reaches the log escaped: no
    forged line."""
    path = str(tmp_path / "x\nFORGED INFO nfd_gpu.agent: published 99 labels")
    p: subprocess.CompletedProcess[str]
    p, _ = run_cli_with_peak(
        ["run", "--oneshot", "--no-udev", "--root", str(FIXTURES / "hgx-h100"),
         "--profile", "nvidia", "--sharing-config", path, "--features-dir", str(tmp_path)],
        timeout=20,
    )  # fmt: skip
    # the sharing config has no valid version: nothing is published (docs/reliability.md)
    assert p.returncode == 1 and "no valid version yet" in p.stderr, p.stderr
    assert not any(line.startswith("FORGED") for line in p.stderr.splitlines()), p.stderr
    assert "x\\nFORGED" in p.stderr
