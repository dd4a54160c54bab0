"""Runs the example CI pipelines of examples/ci/ locally, the way GitHub Actions and GitLab CI would.

Jobs are ordered by `needs` (and GitLab stages), their conditions evaluated (`if:` expressions, `rules:`,
`when:`), and every shell step runs with `bash -eo pipefail` in a real Git work tree, with the real
`dra-gitops` on PATH: a small launcher that runs `reconciler.cli.main` and logs each invocation's arguments
and exit code. Steps that only install dra-gitops (`pip install`) are skipped, `uses:` steps are recorded
for the test to inspect (their inputs are checked, their effect is not simulated: all jobs share one work
tree, which stands in for artifacts passed between jobs).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ci_text import dra_commands, evaluate, expand, matches, substitute, truthy

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "examples" / "ci"
GITHUB = {name: CI / "github" / f"{name}.yml" for name in ("policy-report", "inventory", "deploy", "promote")}
GITLAB = CI / "gitlab" / ".gitlab-ci.yml"
GITLAB_PROMOTE = CI / "gitlab" / "promote.gitlab-ci.yml"

# --------------------------------------------------------------------------------------------------------
# the pipeline files


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def on(workflow: dict[Any, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the key `on` as True.
    triggers = workflow.get("on") or workflow[True]
    assert isinstance(triggers, dict)
    return triggers


def scripts(path: Path) -> list[str]:
    """Every run:/script: text of a pipeline file."""
    data = load(path)
    if path.parent.name == "github":
        return [s["run"] for job in data["jobs"].values() for s in job["steps"] if "run" in s]
    out: list[str] = []
    for body in data.values():
        if isinstance(body, dict) and "script" in body:
            out.extend(str(line) for line in body["script"])
    return out


# --------------------------------------------------------------------------------------------------------
# the work tree, the launcher and the log


@dataclass
class Invocation:
    job: str
    step: str
    argv: list[str]
    code: int


@dataclass
class StepRun:
    name: str
    outcome: str  # success, failure, skipped, not-run (install steps), uses
    script: str = ""
    uses: str = ""
    with_: dict[str, Any] = field(default_factory=dict)
    output: str = ""
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class JobRun:
    id: str
    result: str  # success, failure, skipped
    steps: list[StepRun] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)


class Workspace:
    """A Git work tree to run in, a bin directory with the `dra-gitops` launcher, the invocation log."""

    def __init__(self, repo: Path, scratch: Path) -> None:
        self.repo = repo
        self.scratch = scratch
        self.bin = scratch / "bin"
        self.log = scratch / "dra-gitops-invocations.jsonl"
        self.bin.mkdir(parents=True, exist_ok=True)
        launcher = self.bin / "dra-gitops"
        launcher.write_text(
            f"#!{sys.executable}\n"
            "import json, os, sys\n"
            "from reconciler.cli import main\n"
            "code = 0\n"
            "try:\n"
            "    main()\n"
            "except SystemExit as exc:\n"
            "    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)\n"
            "with open(os.environ['DRA_GITOPS_TEST_LOG'], 'a') as log:\n"
            "    entry = {'step': os.environ['DRA_GITOPS_TEST_STEP'], 'argv': sys.argv[1:], 'code': code}\n"
            "    log.write(json.dumps(entry) + '\\n')\n"
            "sys.exit(code)\n"
        )
        launcher.chmod(0o755)

    def invocations(self) -> list[Invocation]:
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            entry = json.loads(line)
            job, _, step = entry["step"].partition("/")
            out.append(Invocation(job, step, entry["argv"], entry["code"]))
        return out

    def base_env(self, job: str, step: str) -> dict[str, str]:
        return {
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(self.scratch),
            "PYTHONPATH": str(ROOT),
            "NO_COLOR": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "DRA_GITOPS_TEST_LOG": str(self.log),
            "DRA_GITOPS_TEST_STEP": f"{job}/{step}",
        }

    def bash(self, script: str, env: dict[str, str]) -> tuple[int, str]:
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=self.repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        return done.returncode, done.stdout + done.stderr


def is_install(script: str) -> bool:
    return "pip install" in script


def _read_kv(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if "=" in line:
                key, _, value = line.partition("=")
                out[key] = value
    return out


def _order(jobs: Mapping[str, Any], needs_of: Any) -> list[str]:
    done: list[str] = []
    while len(done) < len(jobs):
        ready = [j for j in jobs if j not in done and all(n in done for n in needs_of(j))]
        if not ready:
            raise ValueError("cycle in needs")
        done.append(ready[0])
    return done


# --------------------------------------------------------------------------------------------------------
# GitHub Actions


def github_needs(job: Mapping[str, Any]) -> list[str]:
    needs = job.get("needs") or []
    return [needs] if isinstance(needs, str) else list(needs)


def run_github(
    workflow: Mapping[str, Any], ws: Workspace, github: Mapping[str, str], secrets: Mapping[str, str]
) -> dict[str, JobRun]:
    """Run every job of a workflow for one event; `github` holds the github.* context values."""
    jobs: Mapping[str, Any] = workflow["jobs"]
    results: dict[str, JobRun] = {}
    runner_temp = ws.scratch / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    for job_id in _order(jobs, lambda j: github_needs(jobs[j])):
        job = jobs[job_id]
        needs = github_needs(job)
        lookup: dict[str, Any] = {f"github.{k}": v for k, v in github.items()}
        lookup |= {f"secrets.{k}": v for k, v in secrets.items()}
        for n in needs:
            lookup[f"needs.{n}.result"] = results[n].result
            lookup |= {f"needs.{n}.outputs.{k}": v for k, v in results[n].outputs.items()}
        ancestors = _ancestors(jobs, job_id)
        failed = any(results[a].result == "failure" for a in ancestors)
        all_ok = all(results[n].result == "success" for n in needs)
        status = {"always": True, "cancelled": False, "failure": failed, "success": all_ok and not failed}
        condition = str(job.get("if", "success()"))
        condition = condition.strip().removeprefix("${{").removesuffix("}}")
        if not truthy(evaluate(condition, lookup, status)):
            results[job_id] = JobRun(job_id, "skipped")
            continue
        run = JobRun(job_id, "success")
        results[job_id] = run
        github_env = runner_temp / f"{job_id}.env"
        github_env.write_text("")
        summary = ws.scratch / f"{job_id}.summary.md"
        env_layers = [workflow.get("env") or {}, job.get("env") or {}]
        step_lookup = dict(lookup)
        for number, step in enumerate(job["steps"]):
            name = step.get("name") or step.get("uses") or f"step {number}"
            step_id = step.get("id", f"step{number}")
            failed_step = any(s.outcome == "failure" for s in run.steps)
            step_status = {
                "always": True,
                "cancelled": False,
                "failure": failed_step,
                "success": not failed_step,
            }
            step_condition = str(step.get("if", "success()")).strip().removeprefix("${{").removesuffix("}}")
            if not re.search(r"\b(success|failure|always|cancelled)\(\)", step_condition):
                step_condition = f"success() && ({step_condition})"  # implied, as on GitHub
            env = ws.base_env(job_id, name)
            env |= {"GITHUB_WORKSPACE": str(ws.repo), "RUNNER_TEMP": str(runner_temp), "CI": "true"}
            env |= {f"GITHUB_{k.upper()}": v for k, v in github.items() if "." not in k}
            for layer in env_layers:
                env |= {k: substitute(str(v), step_lookup) for k, v in layer.items()}
            step_lookup |= {f"env.{k}": v for k, v in env.items()}
            if not truthy(evaluate(step_condition, _step_outputs(step_lookup), step_status)):
                run.steps.append(StepRun(name, "skipped"))
                step_lookup[f"steps.{step_id}.outcome"] = "skipped"
                continue
            if "uses" in step:
                inputs = {k: substitute(str(v), step_lookup) for k, v in (step.get("with") or {}).items()}
                run.steps.append(StepRun(name, "uses", uses=step["uses"], with_=inputs))
                step_lookup[f"steps.{step_id}.outcome"] = "success"
                continue
            script = substitute(step["run"], step_lookup)
            if is_install(script):
                run.steps.append(StepRun(name, "not-run", script=script))
                continue
            env |= _read_kv(github_env)
            env |= {k: substitute(str(v), step_lookup) for k, v in (step.get("env") or {}).items()}
            output_file = runner_temp / f"{job_id}.{step_id}.out"
            output_file.write_text("")
            env |= {
                "GITHUB_OUTPUT": str(output_file),
                "GITHUB_ENV": str(github_env),
                "GITHUB_STEP_SUMMARY": str(summary),
            }
            code, output = ws.bash(script, env)
            outcome = "success" if code == 0 else "failure"
            run.steps.append(StepRun(name, outcome, script=script, output=output, env=env))
            step_lookup[f"steps.{step_id}.outcome"] = outcome
            step_lookup |= {f"steps.{step_id}.outputs.{k}": v for k, v in _read_kv(output_file).items()}
            if outcome == "failure":
                run.result = "failure"
        for key, expr in (job.get("outputs") or {}).items():
            run.outputs[key] = substitute(str(expr), _defaulting(step_lookup))
    return results


class _defaulting(dict[str, Any]):
    """Outputs of steps that did not run are empty strings, as on GitHub."""

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: str) -> str:
        return ""


class _step_outputs(dict[str, Any]):
    """Outputs a step did not set (it failed, or was skipped) are empty strings, as on GitHub."""

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key) or (isinstance(key, str) and key.startswith("steps."))

    def __missing__(self, key: str) -> str:
        return ""


def _ancestors(jobs: Mapping[str, Any], job_id: str) -> set[str]:
    seen: set[str] = set()
    todo = list(github_needs(jobs[job_id]))
    while todo:
        j = todo.pop()
        if j not in seen:
            seen.add(j)
            todo.extend(github_needs(jobs[j]))
    return seen


# --------------------------------------------------------------------------------------------------------
# GitLab CI


def gitlab_jobs(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Jobs with `extends` resolved (one level, as the example uses it)."""
    reserved = {"stages", "default", "variables", "include", "workflow"}
    out = {}
    for name, body in config.items():
        if name in reserved or name.startswith(".") or not isinstance(body, dict):
            continue
        merged: dict[str, Any] = {}
        for parent in [body["extends"]] if isinstance(body.get("extends"), str) else body.get("extends", []):
            merged |= config[parent]
        out[name] = merged | {k: v for k, v in body.items() if k != "extends"}
    return out


def gitlab_rule_if(expr: str, env: Mapping[str, str]) -> bool:
    """`$A == "x"`, `$A == $B`, `$A != ...`, `$A` alone, joined with && and ||."""
    python = re.sub(r"\$(\w+)", lambda m: f"'{env.get(m.group(1), '')}'", expr)
    python = python.replace('"', "'")
    lookup: dict[str, Any] = {}
    return truthy(evaluate(python, lookup, {}))


def expand_value(value: str, env: Mapping[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), ""), value)


def run_gitlab(
    config: Mapping[str, Any],
    ws: Workspace,
    predefined: Mapping[str, str],
    project_variables: Mapping[str, str],
    play_manual: bool = True,
) -> dict[str, JobRun]:
    jobs = gitlab_jobs(config)
    stages: list[str] = config["stages"]
    default = config.get("default") or {}
    results: dict[str, JobRun] = {}
    dotenv: dict[str, dict[str, str]] = {}
    ordered = sorted(jobs, key=lambda j: stages.index(jobs[j].get("stage", "test")))
    for job_id in ordered:
        job = jobs[job_id]
        env = ws.base_env(job_id, "script") | {"CI": "true", "CI_PROJECT_DIR": str(ws.repo)}
        env |= dict(predefined)
        when = job.get("when", "on_success")
        if "rules" in job:
            chosen = next((r for r in job["rules"] if "if" not in r or gitlab_rule_if(r["if"], env)), None)
            if chosen is None or chosen.get("when") == "never":
                continue  # not in this pipeline at all
            when = chosen.get("when", when)
        needs = job.get("needs")
        earlier = (
            [n for n in needs if n in results]
            if needs is not None
            else [j for j in results if stages.index(jobs[j]["stage"]) < stages.index(job["stage"])]
        )
        upstream = [results[n].result for n in earlier]
        any_failed = "failure" in upstream
        blocked = any(r in ("skipped", "manual") for r in upstream) and needs is not None
        run_it = {
            "on_success": not any_failed and not blocked,
            "manual": not any_failed and not blocked and play_manual,
            "on_failure": any_failed,
            "always": True,
        }[when]
        if not run_it:
            playable = when == "manual" and not any_failed and not blocked  # else skipped, as on GitLab
            results[job_id] = JobRun(job_id, "manual" if playable else "skipped")
            continue
        env |= dict(project_variables)
        variables = dict(config.get("variables") or {}) | dict(job.get("variables") or {})
        for key, value in variables.items():
            if key not in project_variables:  # project CI/CD variables override the file's
                env[key] = expand_value(str(value), env)
        for n in earlier:
            env |= dotenv.get(n, {})
        before = job.get("before_script", default.get("before_script", []))
        lines = [line for line in [*before, *job["script"]] if not is_install(line)]
        script = "\n".join(lines)
        code, output = ws.bash(script, env)
        run = JobRun(job_id, "success" if code == 0 else "failure")
        run.steps.append(StepRun("script", run.result, script=script, output=output, env=env))
        reports = (job.get("artifacts") or {}).get("reports") or {}
        if "dotenv" in reports:
            dotenv[job_id] = _read_kv(ws.repo / reports["dotenv"])
        results[job_id] = run
    return results


def unmatched(runs: Mapping[str, JobRun], ws: Workspace) -> list[Invocation]:
    """Invocations that no `dra-gitops` command of their step explains (variables expanded with the env
    the step ran with), and steps with dra-gitops commands that ran none of them."""
    bad: list[Invocation] = []
    invocations = ws.invocations()
    for job in runs.values():
        for step in job.steps:
            if not step.script:
                continue
            templates = [expand(c, step.env)[1:] for c in dra_commands(step.script)]
            mine = [i for i in invocations if i.job == job.id and i.step == step.name]
            bad.extend(i for i in mine if not any(matches(t, i.argv) for t in templates))
            if templates and not mine:
                bad.append(Invocation(job.id, step.name, ["(none ran)"], -1))
    return bad
