"""The state a deployment wrote before is read as it was: the records load, write back unchanged, and
`status` reports them as before (fixtures of commit 9af4634: tests/fixtures/state/README.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.loop.store.state import TargetState
from reconciler.sim.server import SimCluster

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "state"
OLD_STATES: dict[str, dict[str, str]] = json.loads((FIXTURES / "configmaps-9af4634.json").read_text())
OLD_STATUS: dict[str, dict[str, Any]] = json.loads((FIXTURES / "status-9af4634.json").read_text())


@pytest.mark.parametrize("name", sorted(OLD_STATES))
def test_an_old_state_writes_back_byte_for_byte(name: str) -> None:
    data = OLD_STATES[name]
    assert TargetState.from_data(data).to_data() == data


@pytest.fixture(scope="module")
def old_states(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An API-only cluster holding every old state ConfigMap; the kubeconfig to reach it."""
    with SimCluster() as sim, ClusterClient.for_url(sim.url) as client:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dra-gitops"}}
        client.create(client.resource_for("v1", "Namespace"), namespace)
        for name, data in OLD_STATES.items():
            meta = {"name": f"dra-gitops-{name}", "namespace": "dra-gitops"}
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
            client.create(client.resource_for("v1", "ConfigMap"), body)
        yield sim.write_kubeconfig(tmp_path_factory.mktemp("old-states") / "kubeconfig")


@pytest.mark.parametrize("name", sorted(OLD_STATES))
def test_status_reports_an_old_state_as_before(old_states: Path, name: str) -> None:
    base = ["status", "--target", name, "--kubeconfig", str(old_states)]
    text = CliRunner().invoke(cli, [*base, "--history", "20"])
    as_json = CliRunner().invoke(cli, [*base, "-o", "json", "--history", "3"])
    expected = OLD_STATUS[name]
    assert text.stdout == expected["text"]
    assert as_json.stdout == expected["json"]
    assert text.exit_code == as_json.exit_code == expected["exit_code"]
