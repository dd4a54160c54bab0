"""What `--version -v` reports beside our version: the engines a run uses, and where each comes from."""

from __future__ import annotations

import platform
from importlib import metadata

from reconciler.errors import DraGitopsError


def engine_versions() -> list[str]:
    lines = [f"python {platform.python_version()}"]
    try:
        from reconciler.render.kustomize import find_engine

        lines.append(f"kustomize: {find_engine().describe()}")
    except DraGitopsError as exc:
        lines.append(f"kustomize: unavailable: {exc}")
    for package in ("gordon-to-regorus", "kubernetes", "gitpython"):
        try:
            lines.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            lines.append(f"{package}: not installed")
    return lines
