"""Shared fixtures: a simulated cluster on a random port, started in a thread for each test.

And the suite's split, in one place (`pytest_collection_modifyitems`): what is slow by nature is marked
`slow` here, by path or node id, and left out of the default run (`-m "not slow"` in pyproject.toml's
addopts); `pytest -m slow` runs it, as .ci/run does right after the README's test command.

Every test here runs in parallel with others (pytest-xdist, `-n auto`): it binds its own free port on
127.0.0.1 (port 0) and writes under its own `tmp_path`. `--dist loadscope` keeps a module's tests on one
worker, so a module-scoped fixture (a controller that ran every verb, a dashboard's world) is built once.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator

import pytest

from reconciler.sim.server import SimCluster

# What dra-gitops keeps in the user's cache directory (the policy set's parsed heads) goes to a directory of
# this run's, not to the home of whoever runs the suite.
os.environ.setdefault("DRA_GITOPS_CACHE_DIR", tempfile.mkdtemp(prefix="dra-gitops-cache-"))

# Slow by nature, by node id prefix (a folder, a module or one test): why each is slow.
SLOW: dict[str, str] = {
    "tests/faults/": "real processes killed at chosen points, restarted, frozen (issue 18)",
    "tests/waves/test_waves_kill.py": "a real controller killed mid-wave, another one resuming the rollout",
    "tests/ui/test_browser.py": "the browser suite: headless Chromium over every page",
    "tests/cluster/test_lease_sharding.py": "multi-replica sharding: Leases expiring in real time",
    "tests/deploy/test_sharding_rbac.py": "multi-replica sharding under the reconciler's role",
    "tests/reconcile/test_controller.py::test_two_replicas_share_three_targets_and_take_over_from_a_dead_one": (
        "multi-replica sharding with real controllers and a kill -9"
    ),
    "tests/reconcile/test_controller.py::test_kill_9_between_stages_then_restart_converges_to_one_revision": (
        "a real-process fault kill"
    ),
    "tests/reconcile/test_run_once.py::test_a_killed_run_once_leaves_a_lease_the_next_run_once_takes_over": (
        "a real-process fault kill, then a Lease's expiry"
    ),
    "tests/examples/test_ci_promote.py::test_gitlab_promote_": "a whole CI promotion pipeline, job by job",
    "tests/examples/test_ci_promote.py::test_github_promote_": "a whole CI promotion pipeline, job by job",
    "tests/examples/test_ci_examples.py::test_gitlab_push_mode_": "a whole CI pipeline, job by job",
    "tests/examples/test_ci_examples.py::test_github_push_mode_": "a whole CI pipeline, job by job",
    "tests/reconcile/test_clusters.py::test_one_controller_two_clusters_and_a_stopped_one_": (
        "a controller process over two clusters, one of them stopped"
    ),
    "tests/reconcile/test_published_ref.py::test_production_follows_the_ref_staging_publishes_": (
        "two controller processes, staging and production"
    ),
    "tests/demo/test_demo.py::test_keep_leaves_a_cluster_to_explore_until_stopped": "the whole demo story",
    "tests/demo/test_demo.py::test_workdir_is_kept": "the whole demo story",
    "tests/demo/test_demo.py::test_the_story_plays_to_the_end_and_leaves_nothing": "the whole demo story",
    "tests/checklist/test_checklist_sim.py::test_the_command_against_demo_keep": "the whole demo story",
    "tests/deploy/test_operator_rbac.py": "every operator verb as a process against a running controller",
    "tests/policy/test_engines.py::test_policy_tests_pass_on_the_opa_server": (
        "every bundled policy test through the OPA server"
    ),
}


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers per CPU this process may run on. The suite mostly waits (control planes,
    grace periods, controllers' polls): on 2 busy cores, 4 workers ran the default set in 157 s where 2 took
    278 s, with the same CPU time. PYTEST_XDIST_AUTO_NUM_WORKERS still says how many."""
    named = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "")
    return int(named) if named.isdigit() else 2 * len(os.sched_getaffinity(0))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "slow: slow by nature (see tests/conftest.py); left out by default, run with `pytest -m slow`",
    )


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:  # node ids are relative to the rootdir, the repository
        if item.nodeid.startswith(tuple(SLOW)):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def worker_kubectl_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """kubectl keeps discovery under ~/.kube/cache by host and port, which clusters of tests run side by
    side reuse: each worker has a cache of its own, and each test too (below)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KUBECACHEDIR", str(tmp_path_factory.getbasetemp() / "kubectl-cache" / "session"))
        yield


@pytest.fixture(autouse=True)
def kubectl_cache_per_test(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv(
        "KUBECACHEDIR", str(tmp_path_factory.getbasetemp() / "kubectl-cache" / uuid.uuid4().hex)
    )


@pytest.fixture
def sim_cluster() -> Iterator[SimCluster]:
    """An API-only simulated cluster (no control plane) on 127.0.0.1; stopped after the test."""
    with SimCluster() as cluster:
        yield cluster


@pytest.fixture
def sim_url(sim_cluster: SimCluster) -> str:
    return sim_cluster.url
