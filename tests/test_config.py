from __future__ import annotations

import re
from typing import Any

import pytest

from nfd_gpu.config.loader import ConfigError, load


def test_precedence_file_env_flags(tmp_path: Any) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("interval: 30\nexpiry: 600\noutputs: [featurefile, hook]\nlog-format: json\n")
    cfg = load(str(f), env={})
    assert (cfg.interval, cfg.outputs, cfg.log_format) == (30.0, ("featurefile", "hook"), "json")
    cfg = load(str(f), env={"NFD_GPU_INTERVAL": "20"})
    assert cfg.interval == 20.0
    cfg = load(str(f), env={"NFD_GPU_INTERVAL": "20"}, flags={"interval": 10, "oneshot": None})
    assert cfg.interval == 10.0 and cfg.oneshot is False


def test_xids_as_yaml_numbers(tmp_path: Any) -> None:
    # the way a YAML file writes XIDs; a boolean is still no list item
    f = tmp_path / "c.yaml"
    f.write_text("health_nonfatal_xids: [13, 31, 79]\n")
    assert load(str(f), env={}).health_nonfatal_xids == ("13", "31", "79")
    f.write_text("health_nonfatal_xids: [13, true]\n")
    with pytest.raises(ConfigError, match="expected a list of strings"):
        load(str(f), env={})


def test_downward_api_env_below_nfd_gpu_env() -> None:
    env = {"NODE_NAME": "n1", "POD_NAMESPACE": "ns", "NFD_GPU_NODE_NAME": "n2"}
    cfg = load(None, env=env, flags={"outputs": ["nodefeature"]})
    assert (cfg.node_name, cfg.namespace) == ("n2", "ns")


@pytest.mark.parametrize(
    ("content", "env", "message"),
    [
        ("interval: [1]\n", {}, "c.yaml: interval: expected a number"),
        ("bogus: 1\n", {}, "c.yaml: unknown setting 'bogus'"),
        ("a: [\n", {}, "c.yaml: invalid YAML"),
        ("", {"NFD_GPU_NOPE": "1"}, "unknown variable NFD_GPU_NOPE"),
        ("outputs: nodefeature\n", {}, "needs a node name"),
        ("interval: 60\nexpiry: 60\n", {}, "at least twice the interval"),
        ("profiles: [neutral, bogus]\n", {}, "profiles: unknown value 'bogus' (choose from"),
        ("outputs: [featurefile, x]\n", {}, "outputs: unknown value 'x' (choose from feature"),
        ("", {"NFD_GPU_OWNER_REFS": "pod,x"}, "owner_refs: unknown value 'x' (choose from pod"),
        ("mig_strategy: x\n", {}, "mig_strategy: unknown value 'x' (choose from none"),
        ("log_format: x\n", {}, "log_format: unknown value 'x' (choose from text, json)"),
        ("log_level: x\n", {}, "log_level: unknown value 'x' (choose from debug"),
        ("nvml: x\n", {}, "nvml: unknown value 'x' (choose from auto, on, off)"),
        ("outputs: [featurefile, featurefile]\n", {}, "configuration: outputs has duplicates"),
        ("", {"NFD_GPU_OWNER_REFS": "pod,pod"}, "configuration: owner_refs has duplicates"),
        # refused like any bad value, not replaced by every health default at start (and
        # on a reload, which then keeps the last valid configuration)
        ("health_nonfatal_xids: 13,4e\n", {}, "health_nonfatal_xids: '4e' is not an XID"),
        ("health_hold_passes: 2.5\n", {}, "health_hold_passes: expected a whole number"),
        ("", {"NFD_GPU_HEALTH_CORRECTABLE": "0.5"}, "health_correctable: expected a whole"),
    ],
)
def test_errors_name_the_source(
    tmp_path: Any, content: str, env: dict[str, str], message: str
) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(content)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load(str(f), env=env)


def test_a_non_utf8_config_file_is_one_error_naming_it(tmp_path: Any) -> None:
    f = tmp_path / "c.yaml"
    f.write_bytes(b"interval: 5\n\xff\xfe\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: not UTF-8 \(byte 12\)$"):
        load(str(f), env={})
