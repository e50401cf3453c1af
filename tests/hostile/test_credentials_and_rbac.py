"""Credentials rotated in place and a Role without ``watch`` (issue 34, finding 9).

Before: out of cluster, a kubeconfig rewritten at the same path (rotated credentials) was
never picked up on SIGHUP (the sinks were rebuilt only when a setting changed: the path
had not), so the agent kept sending the old token; and a Role without the ``watch`` verb
fell back to the hourly resync GET with ``/readyz`` 200 and no sign. Now the kubeconfig's
contents are part of what a reload compares, and the missing verb is a ``/readyz`` line.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from nfd_gpu.agent import Agent
from nfd_gpu.agent.metrics import Metrics
from nfd_gpu.config import loader as config
from tests.hostile.test_api_faults import NS, Host, _until, running_agent
from tests.k8s_api_server import FakeKubeAPI


def test_rotated_kubeconfig_is_reloaded_on_sighup(k8s_server: FakeKubeAPI, tmp_path: Path) -> None:
    kc = Path(k8s_server.kubeconfig(str(tmp_path / "kubeconfig")))
    flags = {
        "outputs": "nodefeature", "kubeconfig": str(kc), "node_name": "node-1",
        "namespace": NS, "owner_refs": "", "udev": False,
    }  # fmt: skip
    host = Host()
    agent = Agent(
        config.load(env={}, flags=flags),
        scan=host.scan,
        reload=lambda: config.load(env={}, flags=flags),
        metrics=Metrics(),
    )
    try:
        assert agent.run_pass()
        assert set(k8s_server.auth) == {"Bearer test-token"}
        doc = yaml.safe_load(kc.read_text())
        doc["users"][0]["user"]["token"] = "rotated-token"
        kc.write_text(yaml.safe_dump(doc))  # same path, new contents
        del k8s_server.auth[:]
        agent.request_reload()
        agent._reload()  # what the loop runs on SIGHUP
        host.labels["x/n"] = "3"
        agent.run_pass()
        # (the old sink's watch may still reconnect once while it is being stopped)
        assert k8s_server.auth[-1] == "Bearer rotated-token", k8s_server.auth
    finally:
        for sink in agent.sinks:
            sink.close()


def test_role_without_watch_is_a_readyz_line(k8s_server: FakeKubeAPI) -> None:
    k8s_server.deny("watch")
    with running_agent(k8s_server) as (agent, _):

        def said() -> bool:
            code, body = agent.metrics.readyz()
            return code == 200 and b"watch forbidden" in body

        assert _until(said, 5) < 5, agent.metrics.readyz()
        time.sleep(0.1)
