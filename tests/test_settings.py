"""The settings are declared once (nfd_gpu/config/settings.py): the docs table, run's and scan's
options, the environment and the config file's keys all come from that declaration."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import typer

from nfd_gpu.cli import app
from nfd_gpu.config import loader as config
from nfd_gpu.config import settings
from nfd_gpu.labels import registry
from nfd_gpu.labels.nvidia import MIG_STRATEGIES, NvidiaOptions
from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "config_docs.py"


def test_configuration_doc_is_current() -> None:
    res = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert res.returncode == 0, res.stderr


def test_check_sees_a_stale_table() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import config_docs  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(SCRIPT.parent))
    text = config_docs.DOC.read_text(encoding="utf-8")
    stale = text.replace("| `interval` | `--interval` |", "| `interval` | `--every` |")
    assert stale != text
    assert config_docs.render(stale) == text


def _command(name: str) -> Any:
    # looked up as a command line looks it up: nfd_gpu.cli builds a command when named; its
    # options listed as a shell completion lists them, with their help texts filled
    cmd = typer.main.get_command(app).get_command(None, name)  # type: ignore[attr-defined]
    ctx = cmd.context_class(cmd, resilient_parsing=True)
    return {o: p for p in cmd.get_params(ctx) for o in (*p.opts, *p.secondary_opts)}


def test_run_has_one_option_per_setting_with_a_flag() -> None:
    run = _command("run")
    for key, s in settings.SETTINGS.items():
        names = [n for f in settings.flags(key) for n in f.split("/")]
        if s.run_help is None:
            assert not any(n in run for n in names), key
            continue
        for n in names:
            assert run[n].name == key, (key, n)
            assert "{" not in run[n].help, (key, run[n].help)


def test_scan_reads_the_same_environment_as_run() -> None:
    scan = _command("scan")
    shared = {k for k, s in settings.SETTINGS.items() if s.scan_help}
    assert shared == {p.name for p in scan.values() if p.name in settings.SETTINGS}
    for p in scan.values():
        if p.name in shared:
            assert p.envvar == f"NFD_GPU_{p.name.upper()}"
            assert p.name in config.read_env({p.envvar: "1"})


def test_choices_and_defaults_come_from_their_owners() -> None:
    assert settings.default("profiles") == registry.DEFAULT
    assert settings.choices("profiles") == tuple(registry.PROFILES)
    assert set(settings.choices("mig_strategy")) == set(MIG_STRATEGIES)
    # not given (None) is distinct from GFD's default, none, which the nvidia options own
    assert config.Config().mig_strategy is None
    assert settings.choices("mig_strategy")[0] == NvidiaOptions.mig_strategy == "none"
    assert config.STANDARD_ENV == {
        "NODE_NAME": "node_name",
        "POD_NAMESPACE": "namespace",
        "POD_NAME": "pod_name",
        "POD_UID": "pod_uid",
        "KUBECONFIG": "kubeconfig",
    }


def test_fill() -> None:
    assert settings.fill("a {default} b", "interval") == "a 60 b"
    assert settings.fill("{choices_or}", "log_format") == "text or json"
    assert settings.fill("{default}: {others}", "profiles") == "neutral: " + ", ".join(
        p for p in registry.PROFILES if p not in registry.DEFAULT
    )
    assert settings.words(("a",)) == "a" and settings.words(()) == ""
