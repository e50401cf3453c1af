"""Faults survive a restart (docs/health.md "Across restarts", agent/heldstate.py): a GPU
``failed`` before the agent restarted stays ``failed`` until the hardware shows it was
re-initialised (the node rebooted, its PCI function was added again, its driver bound
again), with each output (feature file, NodeFeature). On main a restarted agent read no
XID again and said ``ok``."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.agent import Agent
from nfd_gpu.agent.heldstate import decode, encode
from nfd_gpu.config import loader as config
from nfd_gpu.sinks.featurefile import STATE_PREFIX
from nfd_gpu.sinks.nodefeature import STATE_ANNOTATION, NodeFeatureSink
from tests.conftest import fixture_root
from tests.k8s_api_server import FakeKubeAPI
from tests.sinks.nfd_local_parser import parse_features_dir

G = "gpu.feature.node.kubernetes.io"
BAD = "0000:2a:00.0"  # h100-xid-79's GPU that gets the XID 79
BOOT_A = "0b5e5e1c-6f3a-4d2e-9a57-1a2b3c4d5e6f"
BOOT_B = "7d1c2a90-3b4e-4f61-8c05-6e7f8091a2b3"
NODE = "node-a"


class Out:
    """One output an agent publishes to, kept across its restarts."""

    def __init__(self, kind: str, tmp: Path, server: FakeKubeAPI | None) -> None:
        self.kind = kind
        self.dir = tmp / "features.d"
        self.server = server

    def agent(self, root: Path) -> Agent:
        flags: dict[str, Any] = {"root": str(root), "udev": False, "node_name": NODE}
        if self.kind == "featurefile":
            flags.update(outputs="featurefile", features_dir=str(self.dir))
            return Agent(config.load(env={}, flags=flags))
        import kubernetes

        assert self.server is not None
        client_cfg = kubernetes.client.Configuration()
        client_cfg.host = self.server.url
        client_cfg.retries = 0
        sink = NodeFeatureSink(
            node_name=NODE,
            namespace="nfd-gpu",
            api_client=kubernetes.client.ApiClient(client_cfg),
            owner_refs=(),
            watch=False,
        )
        flags.update(outputs="featurefile", features_dir=str(self.dir / "unused"))
        return Agent(config.load(env={}, flags=flags), sinks=[sink])

    def state(self) -> str | None:
        if self.kind == "featurefile":
            for line in (self.dir / "nfd-gpu").read_text().splitlines():
                if line.startswith(STATE_PREFIX):
                    return line[len(STATE_PREFIX) :]
            return None
        assert self.server is not None
        obj = self.server.objects.get(("nfd-gpu", f"nfd-gpu-{NODE}"))
        assert obj is not None
        notes: dict[str, str] = obj["metadata"].get("annotations") or {}
        return notes.get(STATE_ANNOTATION)

    def put_state(self, text: str) -> None:
        if self.kind == "featurefile":
            path = self.dir / "nfd-gpu"
            lines = [ln for ln in path.read_text().splitlines() if not ln.startswith(STATE_PREFIX)]
            path.write_text("\n".join([lines[0], STATE_PREFIX + text, *lines[1:]]) + "\n")
            return
        assert self.server is not None
        obj = self.server.objects[("nfd-gpu", f"nfd-gpu-{NODE}")]
        obj["metadata"].setdefault("annotations", {})[STATE_ANNOTATION] = text


@pytest.fixture(params=["featurefile", "nodefeature"])
def out(request: pytest.FixtureRequest, tmp_path: Path) -> Out:
    server = request.getfixturevalue("k8s_server") if request.param == "nodefeature" else None
    return Out(request.param, tmp_path, server)


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    shutil.copytree(fixture_root("h100-xid-79"), root, symlinks=True)
    _boot(root, BOOT_A)
    return root


def _boot(root: Path, boot_id: str) -> None:
    path = root / "proc/sys/kernel/random/boot_id"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(boot_id + "\n")


def _failed_then_stopped(agent: Agent) -> dict[str, str]:
    """Passes until the watcher's XID 79 fails the GPU; one more publishes; then the
    agent is gone (its watcher stopped). The labels it published."""
    for _ in range(100):
        if agent.scan().labels.get(f"{G}/health") == "failed":
            break
        time.sleep(0.02)
    assert agent.run_pass()
    agent.health.stop()
    assert agent._last_good is not None  # what the pass published (written or unchanged)
    return agent._last_good.labels


def _events_gone(root: Path) -> None:
    """A new agent's event set gets no event from before it was made: the XID is past."""
    rec = json.loads((root / "nvml.json").read_text())
    (root / "nvml.json").write_text(json.dumps(dict(rec, events=[])))


def _restarted(out: Out, root: Path) -> dict[str, str]:
    agent = out.agent(root)
    assert agent.run_pass()
    agent.health.stop()
    assert agent._last_good is not None  # what the pass published (written or unchanged)
    return agent._last_good.labels


def test_restart_keeps_a_failed_gpu_failed(out: Out, tmp_path: Path) -> None:
    root = _root(tmp_path)
    before = _failed_then_stopped(out.agent(root))
    assert before[f"{G}/health"] == "failed"
    stored = out.state()
    _events_gone(root)
    after = _restarted(out, root)  # on main: health=ok, the XID forgotten
    assert after[f"{G}/health"] == "failed"
    assert after[f"{G}/health.failed.count"] == "1"
    assert after == before
    held = decode(stored or "", NODE).gpus
    assert set(held) == {BAD} and held[BAD].xids == (79,)
    again = _restarted(out, root)  # and after one more restart: still held
    assert again[f"{G}/health"] == "failed"


def test_a_healthy_node_stores_nothing(out: Out, tmp_path: Path) -> None:
    root = _root(tmp_path)
    _events_gone(root)  # no XID: both GPUs ok
    labels = _restarted(out, root)
    assert labels[f"{G}/health"] == "ok"
    assert out.state() is None


def test_reboot_clears_what_was_held(out: Out, tmp_path: Path) -> None:
    root = _root(tmp_path)
    _failed_then_stopped(out.agent(root))
    assert decode(out.state() or "", NODE).boot_id == BOOT_A  # held, with the boot id
    _events_gone(root)
    _boot(root, BOOT_B)  # the node rebooted: a new boot id
    after = _restarted(out, root)
    assert after[f"{G}/health"] == "ok"
    assert out.state() is None  # nothing held any more


def _replace_link(path: Path) -> None:
    """The kernel made the link anew (a new sysfs node): same target, a new inode."""
    tmp = path.with_name(path.name + ".new")
    os.symlink(os.readlink(path), tmp)
    os.replace(tmp, path)


@pytest.mark.parametrize("how", ["pci-function-added-again", "driver-bound-again"], ids=lambda h: h)
def test_reinitialised_gpu_clears_while_stopped(how: str, tmp_path: Path) -> None:
    out = Out("featurefile", tmp_path, None)
    root = _root(tmp_path)
    _failed_then_stopped(out.agent(root))
    _events_gone(root)
    bus = root / "sys/bus/pci/devices" / BAD
    _replace_link(bus if how == "pci-function-added-again" else bus / "driver")
    assert _restarted(out, root)[f"{G}/health"] == "ok"


def test_reinitialised_gpu_clears_while_running(tmp_path: Path) -> None:
    """The same GPU re-initialised while the agent runs: its held XID goes then too."""
    out = Out("featurefile", tmp_path, None)
    root = _root(tmp_path)
    agent = out.agent(root)
    _failed_then_stopped(agent)
    _events_gone(root)
    _replace_link(root / "sys/bus/pci/devices" / BAD / "driver")  # a driver reload
    assert agent.run_pass()
    assert agent._last_good is not None
    assert agent._last_good.labels[f"{G}/health"] == "ok"


def test_gpu_gone_from_the_bus_is_not_resurrected(out: Out, tmp_path: Path) -> None:
    root = _root(tmp_path)
    _failed_then_stopped(out.agent(root))
    assert decode(out.state() or "", NODE).boot == ("0000:18:00.0", BAD)
    _events_gone(root)
    (root / "sys/bus/pci/devices" / BAD).unlink()  # it fell off while the agent was away
    agent = out.agent(root)
    assert agent.run_pass()
    assert agent._last_good is not None
    labels = agent._last_good.labels
    assert labels[f"{G}/count"] == "1"  # not made up again
    addresses = {
        e["attributes"]["address"]
        for e in agent.scan().features["instances"]["gpu.device"]["elements"]
    }
    assert addresses == {"0000:18:00.0"}
    # a GPU the node had at boot, gone: lost, so still failed (and the taint stays)
    assert labels[f"{G}/health.lost.count"] == "1"
    assert labels[f"{G}/health"] == "failed"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{not json", "not JSON"),
        ('{"kind":"someone-else/v1","gpus":{}}', "not an nfd-gpu held state"),
        ("VERSION2", "version 2"),
        ("OTHER-NODE", "written for node 'node-b'"),
        ("BAD-ADDRESS", "is not a PCI address"),
        ("BAD-XID", "an XID is not a number"),
        ("x" * 20000, "more than the 16384"),
    ],
    ids=[
        "not-json",
        "another-writer",
        "version-2",
        "another-node",
        "bad-address",
        "bad-xid",
        "too-long",
    ],
)
def test_malformed_or_foreign_state_is_ignored_with_a_warning(
    out: Out, tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, said: str
) -> None:
    root = _root(tmp_path)
    _failed_then_stopped(out.agent(root))
    _events_gone(root)
    good = json.loads(out.state() or "")
    variants = {
        "VERSION2": dict(good, version=2),
        "OTHER-NODE": dict(good, node="node-b"),
        "BAD-ADDRESS": dict(good, gpus={"../../etc": good["gpus"][BAD]}),
        "BAD-XID": dict(good, gpus={BAD: dict(good["gpus"][BAD], xids=["79"])}),
    }
    if text in variants:
        text = json.dumps(variants[text])
    out.put_state(text)
    caplog.set_level(logging.WARNING, logger="nfd_gpu.agent")
    after = _restarted(out, root)  # no crash: the state is not carried
    assert after[f"{G}/health"] == "ok"
    warned = [r.getMessage() for r in caplog.records if "held health ignored" in r.getMessage()]
    assert len(warned) == 1, caplog.text
    where = str(out.dir / "nfd-gpu") if out.kind == "featurefile" else f"nfd-gpu-{NODE}"
    assert where in warned[0] and said in warned[0], warned[0]


def test_state_is_bounded() -> None:
    from nfd_gpu.agent.heldstate import HeldGpu, HeldState
    from nfd_gpu.model import HealthReason

    many = {
        f"0000:{i:02x}:00.0": HeldGpu(
            "1:2", (HealthReason("aer-fatal", "sysfs", 1, "failed"),), tuple(range(100, 140))
        )
        for i in range(200)
    }
    text = encode(HeldState(BOOT_A, NODE, many, tuple(many)))
    back = decode(text, NODE)
    assert len(back.gpus) == 64 and all(len(g.xids) == 16 for g in back.gpus.values())
    assert len(text) < 16384


def test_nfd_reads_the_feature_file_with_its_held_health_line(tmp_path: Path) -> None:
    """NFD's local source skips the held-health line (a plain comment): the node's labels
    are the published ones."""
    out = Out("featurefile", tmp_path, None)
    labels = _failed_then_stopped(out.agent(_root(tmp_path)))
    assert out.state()
    parsed, _ = parse_features_dir(str(out.dir), dt.datetime.now(dt.timezone.utc))
    assert parsed == labels
