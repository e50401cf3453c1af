"""Soak: the agent under a fault every minute, then the Node's labels and the request rate.

Runs the real agent (real NodeFeatureSink, real kubernetes client, the real scan of the
``hgx-h100`` fixture with the shipped rules; interval 60 s, resync 3600 s as shipped)
against the test API server (tests/k8s_api_server.py) through a loopback proxy
(tests/netproxy.py). Every minute one fault, in turn, for 30 s:

* apiserver restart: every connection cut, new ones refused;
* partition: every open connection stops forwarding (half-open), new ones work;
* 410 Gone on every watch;
* config break: a rule file turns to garbage (its last valid version must hold);
* pod restart: the agent is stopped and a new one started (in this process).

Printed: the requests per minute (all kinds: those the server saw, the watches the proxy
answered 410 itself, and the connections it closed at once while "down", which a real
apiserver restart refuses), their maximum, and whether the object's labels at the end
equal the last valid scan. A request counts in the minute it was sent: the watch stream
a fault cuts was sent in an earlier minute and is not counted again. Acceptance (issue
34): at most 2 requests per node per minute at any point, labels equal. Outside CI (30
minutes):

    python benchmarks/soak.py [--minutes 30] [--faults '410 on every watch,partition']
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nfd_gpu.agent import Agent  # noqa: E402
from nfd_gpu.agent.metrics import Metrics  # noqa: E402
from nfd_gpu.config import loader as config  # noqa: E402
from nfd_gpu.scan import run_scan  # noqa: E402
from tests.k8s_api_server import running  # noqa: E402
from tests.netproxy import Proxy  # noqa: E402

FAULTS = ("apiserver restart", "partition", "410 on every watch", "config break", "pod restart")
NS, NODE = "nfd", "soak-node"
FIXTURE = REPO / "tests" / "fixtures" / "sysfs" / "hgx-h100"


def start_agent(url: str, rules: Path, tmp: Path) -> tuple[Agent, threading.Thread]:
    kc = tmp / "kubeconfig"
    kc.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{url}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    flags = {
        "root": str(FIXTURE), "outputs": "nodefeature", "kubeconfig": str(kc),
        "node_name": NODE, "namespace": NS, "owner_refs": "", "udev": False,
        "rules": str(rules), "nvml": "off",
    }  # fmt: skip
    agent = Agent(config.load(env={}, flags=flags), metrics=Metrics())
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    return agent, thread


def stop_agent(agent: Agent, thread: threading.Thread) -> None:
    agent.request_stop()
    thread.join(10)


def _closed(proxy: Proxy) -> int:
    return sum(1 for _, what in list(proxy.log) if what == "closed")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--minutes", type=int, default=30)
    ap.add_argument(
        "--faults", default=",".join(FAULTS), help="the faults to take in turn (comma list)"
    )
    args = ap.parse_args()
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    if not faults or set(faults) - set(FAULTS):
        ap.error(f"--faults: each one of {', '.join(FAULTS)}")
    tmp = Path(tempfile.mkdtemp(prefix="nfd-gpu-soak-"))
    rules = tmp / "rules.d"
    rules.mkdir()
    for f in ("gpu-class.yaml", "mig-ready.yaml"):
        shutil.copy(REPO / "rules" / f, rules)
    want = run_scan(FIXTURE, rules_path=rules, nfd_attributes=False).labels
    per_minute: list[tuple[str, int, dict[str, int]]] = []
    with running() as api:
        u = urlparse(api.url)
        proxy = Proxy((str(u.hostname), int(u.port or 80)))
        agent, thread = start_agent(proxy.url, rules, tmp)
        time.sleep(5)
        for minute in range(args.minutes):
            fault = faults[minute % len(faults)]
            before = dict(api.counts)
            refused = proxy.refused
            closed = _closed(proxy)
            t0 = time.monotonic()
            good = (rules / "mig-ready.yaml").read_bytes()
            if fault == "apiserver restart":
                proxy.cut()
            elif fault == "partition":
                proxy.freeze()
            elif fault == "410 on every watch":
                proxy.refuse(b"watch=true", 410)
                proxy.cut(down=False)  # the watch open now ends: every new one gets 410
            elif fault == "config break":
                (rules / "mig-ready.yaml").write_text("- [\n")
            else:
                stop_agent(agent, thread)
                agent, thread = start_agent(proxy.url, rules, tmp)
            time.sleep(30)
            proxy.clear()
            (rules / "mig-ready.yaml").write_bytes(good)
            time.sleep(max(0.0, 60 - (time.monotonic() - t0)))
            delta = {k: v - before.get(k, 0) for k, v in api.counts.items() if v - before.get(k, 0)}
            if proxy.refused - refused:  # watch requests the proxy answered 410
                delta["watch (410 at the proxy)"] = proxy.refused - refused
            if _closed(proxy) - closed:  # connections refused while the server was down
                delta["connection (closed at the proxy)"] = _closed(proxy) - closed
            per_minute.append((fault, sum(delta.values()), delta))
            print(f"minute {minute + 1:>2} {fault:<20} {sum(delta.values()):>3} requests {delta}",
                  flush=True)  # fmt: skip
        time.sleep(65)  # one more pass after the last fault
        obj = api.get(NS, f"nfd-gpu-{NODE}")
        stop_agent(agent, thread)
        proxy.stop()
    got = dict(obj["spec"]["labels"]) if obj else None
    worst = max(n for _, n, _ in per_minute)
    print(f"\nload average {os.getloadavg()[0]:.2f}; {args.minutes} minutes, a fault each")
    mean = sum(n for _, n, _ in per_minute) / len(per_minute)
    print(f"requests per minute: max {worst}, mean {mean:.2f}")
    print(f"labels at the end equal the last valid scan: {got == want}")
    ok = got == want and worst <= 2
    print("acceptance (<= 2 requests per minute, labels equal):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
