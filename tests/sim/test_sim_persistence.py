"""The simulated cluster keeps its store in a data directory and serves it again after a restart.

In process (SimCluster(data_dir=...), stopped and made again) and as a real `sim serve --data-dir` process
killed with SIGKILL and restarted on the same directory. Everything goes over HTTP with the official client.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for, widget_crd
from kubernetes import client
from kubernetes.client.rest import ApiException

from reconciler.sim.persist import COMPACT_MIN_BYTES, JOURNAL, SNAPSHOT, DataDirError
from reconciler.sim.server import SimCluster

CRD = widget_crd()


def _api(url: str) -> client.ApiClient:
    cfg = client.Configuration(host=url)
    cfg.retries = 0
    return client.ApiClient(cfg)


def _write_objects(api: client.ApiClient) -> dict[str, Any]:
    """A namespace, an applied ConfigMap (managedFields), a deleted one, a CRD and one of its objects."""
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": "keep"}})
    core.patch_namespaced_config_map(
        "applied",
        "keep",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}},
        field_manager="tester",
        _content_type="application/apply-patch+yaml",
    )
    core.create_namespaced_config_map("keep", {"metadata": {"name": "gone"}})
    core.delete_namespaced_config_map("gone", "keep")
    client.ApiextensionsV1Api(api).create_custom_resource_definition(CRD)
    wait_for(lambda: _served(api), what="the CRD served")
    custom.create_namespaced_custom_object(
        "example.com",
        "v1",
        "keep",
        "widgets",
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}},
    )
    return core.read_namespaced_config_map("applied", "keep").to_dict()


def _served(api: client.ApiClient) -> bool:
    try:
        client.CustomObjectsApi(api).list_namespaced_custom_object("example.com", "v1", "keep", "widgets")
    except ApiException:
        return False
    return True


def _watch(url: str, namespace: str, rv: int) -> bytes:
    query = f"watch=true&resourceVersion={rv}&timeoutSeconds=1"
    with urllib.request.urlopen(
        f"{url}/api/v1/namespaces/{namespace}/configmaps?{query}", timeout=10
    ) as resp:
        return bytes(resp.read())


def _list_rv(api: client.ApiClient) -> int:
    return int(client.CoreV1Api(api).list_namespaced_config_map("keep").metadata.resource_version)


def test_a_restarted_cluster_serves_the_same_objects_with_later_resource_versions(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with SimCluster(data_dir=data) as first:
        api = _api(first.url)
        applied = _write_objects(api)
        rv_before = _list_rv(api)
        widget = client.CustomObjectsApi(api).get_namespaced_custom_object(
            "example.com", "v1", "keep", "widgets", "w"
        )
        api.close()
    with SimCluster(data_dir=data) as second:
        api = _api(second.url)
        core = client.CoreV1Api(api)
        again = core.read_namespaced_config_map("applied", "keep").to_dict()
        assert again["metadata"]["uid"] == applied["metadata"]["uid"]
        assert again["metadata"]["creation_timestamp"] == applied["metadata"]["creation_timestamp"]
        assert again["metadata"]["resource_version"] == applied["metadata"]["resource_version"]
        assert again["metadata"]["managed_fields"] == applied["metadata"]["managed_fields"]
        assert again["data"] == {"a": "1"}
        with pytest.raises(ApiException) as gone:
            core.read_namespaced_config_map("gone", "keep")
        assert gone.value.status == 404
        assert _list_rv(api) == rv_before
        # the custom resource is served again, as it was
        custom = client.CustomObjectsApi(api)
        assert custom.get_namespaced_custom_object("example.com", "v1", "keep", "widgets", "w") == widget
        # the next write gets a resourceVersion greater than any before the restart
        made = core.create_namespaced_config_map("keep", {"metadata": {"name": "after"}})
        assert int(made.metadata.resource_version) > rv_before
        # a re-apply of the same manifest is still a no-op: managedFields came back intact
        reapplied = core.patch_namespaced_config_map(
            "applied",
            "keep",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}},
            field_manager="tester",
            _content_type="application/apply-patch+yaml",
        )
        assert reapplied.metadata.resource_version == applied["metadata"]["resource_version"]
        api.close()


def test_a_watch_from_before_the_restart_gets_410_gone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with SimCluster(data_dir=data) as first:
        api = _api(first.url)
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "keep"}})
        old_rv = _list_rv(api)
        core.create_namespaced_config_map("keep", {"metadata": {"name": "later"}})
        current = _list_rv(api)
        api.close()
    with SimCluster(data_dir=data) as second:
        api = _api(second.url)
        event = json.loads(_watch(second.url, "keep", old_rv).splitlines()[0])
        assert event["type"] == "ERROR"
        assert event["object"]["code"] == 410
        assert event["object"]["reason"] == "Expired"
        assert event["object"]["message"] == f"too old resource version: {old_rv} ({current})"
        # from the current resourceVersion the watch goes on
        assert _watch(second.url, "keep", current) == b""
        api.close()


def test_a_corrupt_journal_line_is_refused_naming_the_file_and_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with SimCluster(data_dir=data) as first:
        client.CoreV1Api(_api(first.url)).create_namespace({"metadata": {"name": "keep"}})
    lines = (data / JOURNAL).read_bytes().split(b"\n")
    lines[1] = b'{"rv": oops'
    (data / JOURNAL).write_bytes(b"\n".join(lines))
    with pytest.raises(DataDirError, match=rf"^{data / JOURNAL}: line 2: corrupt: "):
        SimCluster(data_dir=data)


def test_a_torn_last_record_is_dropped_and_the_rest_served(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with SimCluster(data_dir=data) as first:
        client.CoreV1Api(_api(first.url)).create_namespace({"metadata": {"name": "keep"}})
    with (data / JOURNAL).open("ab") as f:
        f.write(b'{"rv":9999,"g":"","r":"namespaces","ns":"","n":"half","o":{"metad')  # killed mid-write
    with SimCluster(data_dir=data) as second:
        names = [n.metadata.name for n in client.CoreV1Api(_api(second.url)).list_namespace().items]
        assert "keep" in names and "half" not in names


def test_a_foreign_or_busy_directory_is_refused(tmp_path: Path) -> None:
    etcd = tmp_path / "etcd"
    (etcd / "member").mkdir(parents=True)
    with pytest.raises(DataDirError, match=rf"^{etcd}: not a data directory of the simulated cluster"):
        SimCluster(data_dir=etcd)
    snapshot = tmp_path / "other"
    snapshot.mkdir()
    (snapshot / SNAPSHOT).write_text('{"format": "something-else"}\n')
    with pytest.raises(
        DataDirError, match=rf"^{snapshot / SNAPSHOT}: line 1: not a dra-gitops-sim-store file"
    ):
        SimCluster(data_dir=snapshot)
    with (
        SimCluster(data_dir=tmp_path / "busy"),
        pytest.raises(DataDirError, match="in use by another simulated cluster"),
    ):
        SimCluster(data_dir=tmp_path / "busy")


def test_the_journal_is_compacted_and_the_store_still_restored(tmp_path: Path) -> None:
    """Over 16 MiB of journal (80 writes of 250 KB) is folded into the snapshot at the next write."""
    data = tmp_path / "data"
    with SimCluster(data_dir=data) as first:
        core = client.CoreV1Api(_api(first.url))
        core.create_namespace({"metadata": {"name": "keep"}})
        for i in range(80):
            core.create_namespaced_config_map(
                "keep", {"metadata": {"name": f"big-{i}"}, "data": {"x": "y" * 250_000}}
            )
        # folded in once past 16 MiB: the snapshot has those, the journal only the writes since
        assert (data / SNAPSHOT).stat().st_size > COMPACT_MIN_BYTES
        assert (data / JOURNAL).stat().st_size < 5_000_000  # of the 20 MB written
    with SimCluster(data_dir=data) as second:
        items = client.CoreV1Api(_api(second.url)).list_namespaced_config_map("keep").items
        assert len([cm for cm in items if cm.metadata.name.startswith("big-")]) == 80


# ---------------------------------------------------------------------- a real process, killed


class Served:
    def __init__(self, data_dir: Path, kubeconfig: Path) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reconciler",
                "sim",
                "serve",
                "--data-dir",
                str(data_dir),
                "--kubeconfig-out",
                str(kubeconfig),
                "--driver-preinstalled",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        assert self.url.startswith("http://127.0.0.1:"), (
            self.process.stderr.read() if self.process.stderr else ""
        )
        self.api = _api(self.url)

    def kill(self) -> None:
        self.api.close()
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        self.api.close()
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[Served] = []

    def start() -> Served:
        s = Served(tmp_path / "data", tmp_path / "kubeconfig")
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "gpu"},
    "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}},
}
DEVICE_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
}


def _pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "resourceClaims": [{"name": "g", "resourceClaimName": name if name != "trainer" else "gpu"}],
            "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "g"}]}}],
        },
    }


def test_a_killed_sim_serve_restarts_with_every_answered_write_and_its_pods_running(serve: Any) -> None:
    first = serve()
    core, custom = client.CoreV1Api(first.api), client.CustomObjectsApi(first.api)
    core.create_namespace({"metadata": {"name": "ml"}})
    custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", DEVICE_CLASS)
    custom.create_namespaced_custom_object("resource.k8s.io", "v1", "ml", "resourceclaims", CLAIM)
    core.create_namespaced_pod("ml", _pod("trainer"))
    pod = wait_for(
        lambda: (p := core.read_namespaced_pod("trainer", "ml")).status.phase == "Running" and p,
        what="the pod Running",
    )
    claim = custom.get_namespaced_custom_object("resource.k8s.io", "v1", "ml", "resourceclaims", "gpu")
    allocation = claim["status"]["allocation"]
    last = core.create_namespaced_config_map("ml", {"metadata": {"name": "last-write"}, "data": {"k": "v"}})
    first.kill()  # right after the answer: nothing flushed it since but the write itself

    second = serve()
    core, custom = client.CoreV1Api(second.api), client.CustomObjectsApi(second.api)
    kept = core.read_namespaced_config_map("last-write", "ml")
    assert kept.metadata.uid == last.metadata.uid and kept.data == {"k": "v"}
    again = core.read_namespaced_pod("trainer", "ml")
    assert again.metadata.uid == pod.metadata.uid
    assert again.status.phase == "Running"
    started = pod.status.container_statuses[0].state.running.started_at
    assert again.status.container_statuses[0].state.running.started_at == started  # not restarted
    claim = custom.get_namespaced_custom_object("resource.k8s.io", "v1", "ml", "resourceclaims", "gpu")
    assert claim["status"]["allocation"] == allocation
    assert claim["status"]["reservedFor"][0]["uid"] == pod.metadata.uid
    # the restored control plane allocates the other devices, never the one that is taken
    core.create_namespaced_pod("ml", _pod("second"))
    custom.create_namespaced_custom_object(
        "resource.k8s.io", "v1", "ml", "resourceclaims", {**CLAIM, "metadata": {"name": "second"}}
    )
    wait_for(lambda: core.read_namespaced_pod("second", "ml").status.phase == "Running", what="pod 2 Running")
    other = custom.get_namespaced_custom_object("resource.k8s.io", "v1", "ml", "resourceclaims", "second")
    mine = allocation["devices"]["results"][0]
    theirs = other["status"]["allocation"]["devices"]["results"][0]
    assert (theirs["pool"], theirs["device"]) != (mine["pool"], mine["device"])
    assert int(other["metadata"]["resourceVersion"]) > int(last.metadata.resource_version)
    assert core.read_namespaced_pod("trainer", "ml").status.phase == "Running"


def test_sim_serve_names_the_corrupt_file_and_exits_1(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / SNAPSHOT).write_text('{"format": "dra-gitops-sim-store", "version": 1, "rv": 3}\nnot json\n')
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "sim", "serve", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert f"{data / SNAPSHOT}: line 2: corrupt: " in done.stderr
