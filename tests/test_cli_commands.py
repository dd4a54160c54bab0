"""Every command is registered even when a part it does not need cannot be imported (in a subprocess)."""

from __future__ import annotations

import subprocess
import sys

COMMANDS = [
    "abort",
    "apply",
    "approve",
    "check",
    "checklist",
    "demo",
    "diagnose",
    "diff",
    "get",
    "history",
    "inventory",
    "plan",
    "policy",
    "reconcile",
    "resume",
    "retry",
    "rollback",
    "run",
    "sim",
    "status",
    "suspend",
    "sync",
    "ui",
    "watch",
]
# `None` in sys.modules makes every `import reconciler.sim...` fail, as in an install without the sim.
WITHOUT_SIM = "import sys\nsys.modules['reconciler.sim'] = None\n"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_commands_are_all_there_without_the_sim() -> None:
    done = _python(WITHOUT_SIM + "from reconciler.cli import cli\nprint(' '.join(sorted(cli.commands)))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == COMMANDS


def test_a_command_that_needs_no_sim_runs_without_it() -> None:
    code = WITHOUT_SIM + (
        "sys.argv = ['dra-gitops', 'plan', '--help']\nfrom reconciler.cli import main\nmain()"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert "Server-side dry-run of the whole change" in done.stdout
