"""`dra-gitops watch DIR`: re-check a working copy on every save (watchdog), like a linter in watch mode.

Saves come in bursts (an editor writes a temp file, renames it, touches the directory): events are
debounced, and one check runs per quiet period. With a cluster client, the check sees live cluster data
and the change is dry-run on the server too (nothing is written).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from reconciler.delivery.check import CheckOptions, check_paths
from reconciler.errors import DraGitopsError
from reconciler.model.loader import KUSTOMIZATION_NAMES, REPO_CONFIG_NAMES, is_manifest_file
from reconciler.policy.report import RenderOptions, render


def _relevant(path: str) -> bool:
    parts = Path(path).parts
    if any(part.startswith(".") for part in parts[:-1]):
        return False  # .git and other hidden directories
    name = parts[-1] if parts else ""
    # A kustomization without a suffix and a chart's helper templates change what renders too.
    return (
        is_manifest_file(name)
        or name in REPO_CONFIG_NAMES
        or name in KUSTOMIZATION_NAMES
        or name.endswith(".tpl")
    )


class _Changes(FileSystemEventHandler):
    def __init__(self) -> None:
        self.changed = threading.Event()
        self.last = 0.0

    def on_any_event(self, event: FileSystemEvent) -> None:
        paths = [str(event.src_path), str(getattr(event, "dest_path", "") or "")]
        if event.is_directory and event.event_type != "moved":
            return
        if any(p and _relevant(p) for p in paths):
            self.last = time.monotonic()
            self.changed.set()


def check_once(directory: Path, options: CheckOptions, output: str, client: Any | None) -> tuple[str, int]:
    """One check of the directory (and a dry-run with a client); the report and its exit code."""
    facts = None
    if client is not None:
        from reconciler.cluster.facts import collect_facts

        facts = collect_facts(client, options.progress)
    try:
        run = check_paths([directory], options, facts)
    except DraGitopsError as exc:
        return f"error: {exc}\n", exc.exit_code
    text = render(run.result, output, RenderOptions())
    code = run.result.exit_code(False)
    if client is not None and code == 0:
        from reconciler.cluster import applyset
        from reconciler.cluster.apply import dry_run, render_dry_run

        try:
            result = dry_run(client, run.plan, applyset_id=applyset.applyset_id())
        except DraGitopsError as exc:
            return text + f"dry-run: error: {exc}\n", exc.exit_code
        text += render_dry_run(result, show_diff=False)
        code = 0 if result.ok else 1
    return text, code


def watch_directory(
    directory: Path,
    options: CheckOptions,
    *,
    output: str = "text",
    client: Any | None = None,
    debounce: float = 0.3,
    emit: Callable[[str], None],
    progress: Callable[[str], None],
    stop: threading.Event | None = None,
    max_checks: int | None = None,
) -> int:
    """Check now, then after every burst of saves until `stop` (or Ctrl-C); the last check's exit code."""
    stop = stop or threading.Event()
    handler = _Changes()
    observer = Observer()
    observer.schedule(handler, str(directory), recursive=True)
    observer.start()
    checks = 0
    code = 0
    try:
        progress(f"watching {directory} (Ctrl-C to stop)")
        while not stop.is_set():
            text, code = check_once(directory, options, output, client)
            emit(text)
            checks += 1
            if max_checks is not None and checks >= max_checks:
                break
            while not stop.is_set():
                if handler.changed.wait(0.1) and time.monotonic() - handler.last >= debounce:
                    handler.changed.clear()
                    progress("change detected: checking again")
                    break
    except KeyboardInterrupt:
        pass
    finally:
        observer.stop()
        observer.join(timeout=5)
    return code
