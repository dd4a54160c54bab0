"""Targets from `--config` files and from the single-target flags; durations and jitter."""

from __future__ import annotations

import random
import textwrap

import pytest

from reconciler.errors import UserError
from reconciler.loop.config.durations import jittered, parse_duration
from reconciler.loop.config.targetfile import load_targets
from reconciler.loop.config.targets import (
    Secret,
    Target,
    WebhookAuth,
    target_from_flags,
)


def load(text: str) -> list[Target]:
    return load_targets(textwrap.dedent(text), "targets.yaml")


def error_of(text: str) -> str:
    with pytest.raises(UserError) as caught:
        load(text)
    return str(caught.value)


# ---- durations ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "seconds"),
    [
        ("30s", 30.0),
        ("2m", 120.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1h", 3600.0),
        ("1.5s", 1.5),
        ("1h2m3s", 3723.0),
        ("45", 45.0),
        ("2.5", 2.5),
        (10, 10.0),
        (0.25, 0.25),
        ("0s", 0.0),
    ],
)
def test_durations(given: object, seconds: float) -> None:
    assert parse_duration(given, "--poll-interval") == pytest.approx(seconds)


@pytest.mark.parametrize("given", ["", "s", "30x", "1m 30s", "-5s", "-1", "30s5", "nan", "inf", True, [1]])
def test_bad_durations_name_where(given: object) -> None:
    with pytest.raises(UserError) as caught:
        parse_duration(given, "--poll-interval")
    assert str(caught.value).startswith("--poll-interval: ")


@pytest.mark.parametrize(
    ("seconds", "text"), [(30, "30s"), (120, "2m"), (90, "1m30s"), (0.5, "500ms"), (0, "0s")]
)
def test_short_durations_read_as_written(seconds: float, text: str) -> None:
    assert parse_duration(text, "x") == pytest.approx(seconds)


def test_jitter_stays_within_ten_percent_and_varies() -> None:
    rng = random.Random(7)
    values = [jittered(30.0, rng=rng) for _ in range(500)]
    assert all(27.0 <= value <= 33.0 for value in values)
    assert min(values) < 28.0 and max(values) > 32.0  # spread over the range, not a constant
    assert jittered(30.0, fraction=0.0) == 30.0


# ---- the config file -----------------------------------------------------------------------------------


def test_config_with_defaults_and_two_targets() -> None:
    targets = load(
        """\
        defaults:
          pollInterval: 1m
          grace: 10s
          webhooks:
            githubSecretFile: /etc/hooks/github
        targets:
          - name: gpu-prod
            repo: https://github.com/acme/fleet.git
            branch: release
            path: ./clusters/prod/
            stateNamespace: fleet-state
            tokenFile: /etc/git/token
            gpgKeyring: /etc/git/keyring.gpg
            gitRevertBranch: reverts
          - name: gpu-lab
            repo: git@github.com:acme/lab.git
            tagPattern: "v*"
            pollInterval: 5s
            sshKeyFile: /etc/git/id_ed25519
            knownHostsFile: /etc/git/known_hosts
            sshAllowedSigners: /etc/git/allowed_signers
            webhooks:
              gitlabTokenFile: /etc/hooks/gitlab
              genericTokenFile: /etc/hooks/generic
        """
    )
    prod, lab = targets
    assert prod == Target(
        name="gpu-prod",
        repo="https://github.com/acme/fleet.git",
        branch="release",
        path="clusters/prod",
        state_namespace="fleet-state",
        poll_interval=60.0,
        grace=10.0,
        token_file="/etc/git/token",
        gpg_keyring="/etc/git/keyring.gpg",
        git_revert_branch="reverts",
        webhooks=WebhookAuth(github_secret=Secret(file="/etc/hooks/github")),
    )
    assert prod.origin == "targets.yaml:7"
    assert prod.lease_name == "dra-gitops-gpu-prod"
    assert lab.branch is None and lab.tag_pattern == "v*"
    assert lab.poll_interval == 5.0 and lab.grace == 10.0 and lab.state_namespace == "dra-gitops"
    assert lab.ssh_key_file == "/etc/git/id_ed25519" and lab.known_hosts_file == "/etc/git/known_hosts"
    # A target's own `webhooks` replaces the default one as a whole: no secret is inherited by surprise.
    assert lab.webhooks == WebhookAuth(
        gitlab_token=Secret(file="/etc/hooks/gitlab"), generic_token=Secret(file="/etc/hooks/generic")
    )


def test_a_plain_list_is_a_config_and_defaults_apply() -> None:
    (target,) = load("- name: one\n  repo: /srv/git/fleet.git\n")
    assert target == Target(name="one", repo="/srv/git/fleet.git")
    assert (target.branch, target.path, target.poll_interval, target.grace) == ("main", ".", 30.0, 60.0)
    assert target.webhooks == WebhookAuth()


def test_merge_keys_share_settings_and_own_keys_win() -> None:
    targets = load(
        """\
        targets:
          - &base
            name: a
            repo: https://git.example.com/fleet
            pollInterval: 10s
          - <<: *base
            name: b
            pollInterval: 20s
        """
    )
    assert [(t.name, t.repo, t.poll_interval) for t in targets] == [
        ("a", "https://git.example.com/fleet", 10.0),
        ("b", "https://git.example.com/fleet", 20.0),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "targets.yaml:1: the config file has no targets"),
        ("targets: []\n", "targets.yaml:1: `targets` must be a non-empty list"),
        ("defaults: {}\n", "targets.yaml:1: the config file has no `targets` list"),
        (
            "targets:\n  - name: a\n    repo: /r\n    polInterval: 5s\n",
            "targets.yaml:4: unknown key 'polInterval'",
        ),
        ("targets:\n  - name: a\n    repo: /r\n    name: b\n", "targets.yaml:4: duplicate key 'name'"),
        ("targets:\n  - repo: /r\n", "targets.yaml:2: `name` must be a non-empty string"),
        ("targets:\n  - name: a\n", "targets.yaml:2: `repo` is required"),
        ("targets:\n  - name: Prod_1\n    repo: /r\n", "targets.yaml:2: `name` 'Prod_1' must be a DNS label"),
        (f"targets:\n  - name: {'a' * 53}\n    repo: /r\n", "at most 52 characters"),
        (
            "targets:\n  - name: a\n    repo: /r\n    pollInterval: soon\n",
            "targets.yaml:4: invalid duration 'soon'",
        ),
        (
            "targets:\n  - name: a\n    repo: /r\n    pollInterval: 0s\n",
            "targets.yaml:4: `pollInterval` must be longer",
        ),
        ("targets:\n  - name: a\n    repo: /r\n\n    grace: -3\n", "targets.yaml:5: duration must be"),
        (
            "targets:\n  - name: a\n    repo: /r\n    branch: main\n    tagPattern: v*\n",
            "targets.yaml:5: give either `branch` or `tagPattern`",
        ),
        (
            "targets:\n  - name: a\n    repo: /r\n    branch: 'a..b'\n",
            "targets.yaml:4: `branch` 'a..b' is not a valid",
        ),
        (
            "targets:\n  - name: a\n    repo: /r\n    path: ../up\n",
            "targets.yaml:4: `path` '../up' must be relative",
        ),
        (
            "targets:\n  - name: a\n    repo: /r\n    path: /etc\n",
            "targets.yaml:4: `path` '/etc' must be relative",
        ),
        (
            "targets:\n  - name: a\n    repo: https://me:tok@github.com/o/r\n",
            "targets.yaml:3: credentials must not be part of the repository URL",
        ),
        (
            "targets:\n  - name: a\n    repo: ftp://host/r\n",
            "targets.yaml:3: unsupported repository URL scheme 'ftp'",
        ),
        (
            "targets:\n  - name: a\n    repo: https://h/r\n    sshKeyFile: /k\n",
            "targets.yaml:4: `sshKeyFile` needs an ssh repository URL",
        ),
        (
            "targets:\n  - name: a\n    repo: ssh://git@h/r\n    tokenFile: /t\n",
            "targets.yaml:4: `tokenFile` needs an https repository URL",
        ),
        (
            "targets:\n  - name: a\n    repo: /r\n    gitRevertBranch: main\n",
            "targets.yaml:4: `gitRevertBranch` must differ",
        ),
        (
            "targets:\n  - name: a\n    repo: /r\n    webhooks: {github: x}\n",
            "targets.yaml:4: unknown key 'github'",
        ),
        ("targets:\n  - name: a\n    repo: [1]\n", "targets.yaml:3: expected a single value"),
        (
            "targets:\n  - name: a\n    repo: /r\n  - name: a\n    repo: /s\n",
            "targets.yaml:4: target 'a' is defined twice (first at targets.yaml:2)",
        ),
        ("targets: [\n", "targets.yaml:2: invalid YAML"),
        ("defaults:\n  name: x\ntargets:\n  - name: a\n    repo: /r\n", "targets.yaml:2: unknown key 'name'"),
    ],
)
def test_config_errors_point_at_the_line(text: str, expected: str) -> None:
    assert expected in error_of(text)
    assert error_of(text).startswith("targets.yaml:")


def test_same_name_in_two_state_namespaces_is_two_targets() -> None:
    targets = load(
        "targets:\n  - name: a\n    repo: /r\n  - name: a\n    repo: /r\n    stateNamespace: other\n"
    )
    assert [(t.state_namespace, t.name) for t in targets] == [("dra-gitops", "a"), ("other", "a")]


# ---- the flags ------------------------------------------------------------------------------------------


def test_target_from_flags() -> None:
    target = target_from_flags(
        repo="https://github.com/acme/fleet",
        branch="refs/heads/prod",
        path="clusters/prod",
        poll_interval="2m",
        grace="5",
        token_file="/t",
        webhook_secret="s3cret",
        webhook_token_file="/etc/hooks/token",
    )
    assert target.name == "default" and target.branch == "prod" and target.path == "clusters/prod"
    assert (target.poll_interval, target.grace, target.origin) == (120.0, 5.0, "flags")
    assert target.webhooks.github_secret == Secret(value="s3cret")
    assert target.webhooks.gitlab_token == target.webhooks.generic_token == Secret(file="/etc/hooks/token")
    assert "s3cret" not in repr(target)  # secrets never reach a log line through a repr


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"repo": None}, "--repo: `repo` is required"),
        ({"repo": "/r", "poll_interval": "fast"}, "--poll-interval: invalid duration"),
        ({"repo": "/r", "name": "Bad Name"}, "--target: `name` 'Bad Name' must be a DNS label"),
        ({"repo": "/r", "state_namespace": "NS"}, "--state-namespace: `stateNamespace` 'NS'"),
        ({"repo": "/r", "branch": "b", "tag_pattern": "v*"}, "--tag-pattern: give either"),
        ({"repo": "/r", "webhook_secret": "a", "webhook_secret_file": "/f"}, "--webhook-secret: give"),
        ({"repo": "/r", "webhook_token": " "}, "--webhook-token: must not be empty"),
        ({"repo": "/r", "ssh_key_file": "/k"}, "--ssh-key-file: `sshKeyFile` needs an ssh"),
    ],
)
def test_flag_errors_name_the_flag(flags: dict[str, object], expected: str) -> None:
    with pytest.raises(UserError) as caught:
        target_from_flags(**flags)  # type: ignore[arg-type]
    assert str(caught.value).startswith(expected)


def test_prune_and_self_heal_default_on_and_can_be_turned_off() -> None:
    on, off = load(
        """
        targets:
          - {name: a, repo: https://git.example.com/a.git}
          - {name: b, repo: https://git.example.com/b.git, prune: false, selfHeal: false}
        """
    )
    assert (on.prune, on.self_heal) == (True, True)
    assert (off.prune, off.self_heal) == (False, False)


def test_a_switch_that_is_not_true_or_false_names_where() -> None:
    with pytest.raises(UserError, match=r"^targets.yaml:3: `selfHeal` must be true or false, not 'no'"):
        load(
            """
            targets:
              - {name: a, repo: https://git.example.com/a.git, selfHeal: "no"}
            """
        )
