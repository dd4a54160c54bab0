"""A target's `commitStatus` and `notifications` keys in the `run --config` file: what they load to, and
every bad input refused at its `path:line`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.errors import UserError
from reconciler.loop.config.targetfile import load_targets
from reconciler.loop.config.targets import Target
from reconciler.notify.events import DEFAULT_EVENTS, Event
from reconciler.notify.notifier import Notifier, TargetReports
from reconciler.sim.server import SimCluster


def load(text: str) -> list[Target]:
    return load_targets(textwrap.dedent(text), "targets.yaml")


def error_of(text: str) -> str:
    with pytest.raises(UserError) as caught:
        load(text)
    return str(caught.value)


def test_statuses_and_notifications_load_and_defaults_are_inherited() -> None:
    staging, production = load(
        """\
        defaults:
          commitStatus:
            provider: github
            tokenFile: /etc/forge/token
            dashboardUrl: https://grafana.example.com/d/dra?var-target={target}&var-sha={sha}
          notifications:
            - type: slack
              urlFile: /etc/notify/slack-url
              events: [rolled-back, awaiting-approval]
              targets: [production]
        targets:
          - name: staging
            repo: https://github.com/platform/dra.git
          - name: production
            repo: git@github.com:platform/dra-prod.git
            commitStatus:
              provider: gitlab
              apiUrl: https://git.example.com/api/v4/
              repository: platform/clusters/dra
              tokenFile: /etc/forge/gitlab-token
        """
    )
    status = staging.commit_status
    assert status is not None
    assert (status.provider, status.api_url, status.repository, status.token_file) == (
        "github",
        "https://api.github.com",
        "platform/dra",  # from the repository URL
        "/etc/forge/token",
    )
    assert status.token_where == "targets.yaml:4"
    (slack,) = staging.notifications
    assert slack.type == "slack" and slack.url_file == "/etc/notify/slack-url"
    assert slack.events == {Event.ROLLED_BACK, Event.AWAITING_APPROVAL}
    assert not slack.wants("staging", Event.ROLLED_BACK)
    assert slack.wants("production", Event.ROLLED_BACK)
    assert not slack.wants("production", Event.APPLIED)
    other = production.commit_status
    assert other is not None
    assert (other.provider, other.api_url, other.repository) == (
        "gitlab",
        "https://git.example.com/api/v4",
        "platform/clusters/dra",
    )
    assert production.notifications == staging.notifications


def test_a_webhook_gets_the_default_events_and_gitea_needs_its_api() -> None:
    (target,) = load(
        """\
        targets:
          - name: prod
            repo: ssh://git@git.example.com/team/dra.git
            commitStatus: {provider: gitea, apiUrl: "https://git.example.com/api/v1", tokenFile: /t}
            notifications:
              - {type: webhook, urlFile: /u, secretFile: /s}
        """
    )
    assert target.commit_status is not None and target.commit_status.repository == "team/dra"
    (hook,) = target.notifications
    assert hook.events == DEFAULT_EVENTS and hook.secret_file == "/s" and hook.targets is None


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (
            "commitStatus: {provider: bitbucket, tokenFile: /t}",
            "targets.yaml:4: `provider` 'bitbucket' must be one of: github, gitlab, gitea",
        ),
        ("commitStatus: {provider: github}", "targets.yaml:4: `tokenFile` is required"),
        (
            "commitStatus: {provider: github, tokenFile: /t, token: abc}",
            "targets.yaml:4: unknown key 'token' in `commitStatus`",
        ),
        (
            "commitStatus: {provider: gitea, tokenFile: /t}",
            "targets.yaml:4: `apiUrl` is required for gitea",
        ),
        (
            "commitStatus: {provider: github, tokenFile: /t, apiUrl: 'https://me:pw@ghe.example.com/api'}",
            "targets.yaml:4: `apiUrl` must not hold credentials",
        ),
        (
            "commitStatus: {provider: github, tokenFile: /t, repository: just-a-name}",
            "targets.yaml:4: `repository` 'just-a-name' must be owner/name",
        ),
        (
            "commitStatus: {provider: github, tokenFile: /t, dashboardUrl: 'https://d.example.com/{commit}'}",
            "targets.yaml:4: `dashboardUrl` may hold {target} and {sha}, not {commit}",
        ),
        ("commitStatus: github", "targets.yaml:4: `commitStatus` must be a mapping of settings"),
        ("notifications: []", "targets.yaml:4: `notifications` must be a non-empty list"),
        (
            "notifications:\n      - {type: email, urlFile: /u}",
            "targets.yaml:5: `type` 'email' must be one of: webhook, slack",
        ),
        ("notifications:\n      - {type: slack}", "targets.yaml:5: `urlFile` is required"),
        (
            "notifications:\n      - {type: slack, urlFile: /u, secretFile: /s}",
            "targets.yaml:5: `secretFile` is for webhooks",
        ),
        (
            "notifications:\n      - type: webhook\n        urlFile: /u\n        events: [applied, exploded]",
            "targets.yaml:7: unknown event 'exploded' (expected one of: started, applied, denied",
        ),
        (
            "notifications:\n      - type: webhook\n        urlFile: /u\n        targets: [staging]",
            "targets.yaml:7: `targets` names 'staging', which is no target of this file",
        ),
    ],
)
def test_bad_settings_are_refused_at_their_line(block: str, expected: str) -> None:
    text = "targets:\n  - name: prod\n    repo: https://github.com/platform/dra.git\n    " + block + "\n"
    assert error_of(text).startswith(expected)


def test_a_repository_url_that_names_no_repository_needs_repository() -> None:
    message = error_of(
        """\
        targets:
          - name: prod
            repo: /srv/git/dra
            commitStatus: {provider: github, tokenFile: /t}
        """
    )
    assert message.startswith("targets.yaml:4: `commitStatus` needs `repository`")


def test_secret_files_are_checked_when_the_controller_starts_and_never_echoed(tmp_path: Path) -> None:
    url = tmp_path / "url"
    url.write_text("not a url but a secret\n")
    (target,) = load(
        f"""\
        targets:
          - name: prod
            repo: https://github.com/platform/dra.git
            commitStatus: {{provider: github, tokenFile: {tmp_path / "missing"}}}
            notifications:
              - {{type: slack, urlFile: {url}}}
        """
    )

    def notifier() -> Notifier:
        reports = TargetReports(target.commit_status, target.notifications)
        return Notifier({"prod": reports}, lambda *_: None)

    with pytest.raises(UserError, match=r"^targets.yaml:4: `tokenFile` .*/missing: cannot read it"):
        notifier()
    (tmp_path / "missing").write_text("   \n")
    with pytest.raises(UserError, match=r"^targets.yaml:4: `tokenFile` .*/missing is empty"):
        notifier()
    (tmp_path / "missing").write_text("ghp_token\n")
    with pytest.raises(UserError) as caught:
        notifier()
    assert str(caught.value).startswith("targets.yaml:6: `urlFile` ")
    assert "not a url" not in str(caught.value)  # the file's content is a secret: never echoed
    url.write_text("https://hooks.slack.com/services/T0/B0/XYZ\n")
    assert notifier().active


def test_run_refuses_to_start_without_its_token_file(tmp_path: Path, sim_cluster: SimCluster) -> None:
    config = tmp_path / "targets.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            targets:
              - name: prod
                repo: https://github.com/platform/dra.git
                commitStatus:
                  provider: github
                  tokenFile: {tmp_path / "forge-token"}
            """
        )
    )
    kubeconfig = sim_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "--config",
            str(config),
            "--once",
            "--kubeconfig",
            str(kubeconfig),
            "--listen",
            "127.0.0.1:0",
        ],
    )
    assert result.exit_code == 1, result.output
    assert f"{config}:6: `tokenFile` {tmp_path / 'forge-token'}: cannot read it" in result.output


def test_a_gitlab_project_is_an_id_or_a_path() -> None:
    (by_id,) = load(
        """\
        targets:
          - name: prod
            repo: https://gitlab.com/platform/dra.git
            commitStatus: {provider: gitlab, repository: 4242, tokenFile: /t}
        """
    )
    assert by_id.commit_status is not None
    assert (by_id.commit_status.repository, by_id.commit_status.api_url) == (
        "4242",
        "https://gitlab.com/api/v4",
    )
    assert error_of(
        """\
        targets:
          - name: prod
            repo: https://gitlab.com/platform/dra.git
            commitStatus: {provider: gitlab, repository: "not a path", tokenFile: /t}
        """
    ).startswith("targets.yaml:4: `repository` 'not a path' must be a project id or group/project path")
