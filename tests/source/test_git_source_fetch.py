"""GitSource against real repositories: clone once, fetch, follow a branch or a tag, survive a broken cache."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from gitrepos import Remote, manifest, run_git

from reconciler.errors import EnvironmentProblem, UserError
from reconciler.source.remote import FetchResult, GitSource, RefNotFound


def is_ancestor(cache: Path, older: str, newer: str) -> bool:
    """Whether the cache's history has `newer` descend from (or equal) `older`."""
    done = subprocess.run(["git", "-C", str(cache), "merge-base", "--is-ancestor", older, newer], check=False)
    return done.returncode == 0


def names(source: GitSource, sha: str) -> list[str]:
    return [path for path, _ in source.tree(sha).blobs]


@pytest.mark.parametrize("kind", ["file-url", "local-path"])
def test_first_fetch_clones_then_fetches_incrementally(remote: Remote, tmp_path: Path, kind: str) -> None:
    first = remote.commit({"app/a.yaml": manifest("a")}, "first")
    remote.push()
    url = remote.url if kind == "file-url" else str(remote.server)
    cache = tmp_path / "cache" / "target"
    with GitSource(url, cache) as source:
        result = source.fetch()
        assert result == FetchResult(sha=first, ref="refs/heads/main", forced=False, previous=None)
        assert (cache / "HEAD").is_file() and not (cache / "app").exists()  # bare: no checkout
        assert names(source, first) == ["app/a.yaml"]

        assert source.fetch() == FetchResult(sha=first, ref="refs/heads/main", forced=False, previous=first)

        second = remote.commit({"app/b.yaml": manifest("b")}, "second")
        remote.push()
        result = source.fetch()
        assert (result.sha, result.previous, result.forced, result.changed) == (second, first, False, True)
        assert names(source, second) == ["app/a.yaml", "app/b.yaml"]
        assert names(source, first) == ["app/a.yaml"]  # older trees stay readable
        assert source.tree(second).commit.message == "second"


def test_follows_only_its_branch(remote: Remote, tmp_path: Path) -> None:
    main = remote.commit({"a.yaml": manifest("a")})
    remote.push()
    remote.git("checkout", "--quiet", "-b", "staging")
    staging = remote.commit({"a.yaml": manifest("a", "v2")}, "staging only")
    remote.push("staging")
    with GitSource(remote.url, tmp_path / "main-cache") as on_main:
        assert on_main.fetch().sha == main
    with GitSource(remote.url, tmp_path / "staging-cache", branch="staging") as on_staging:
        result = on_staging.fetch()
        assert (result.sha, result.ref) == (staging, "refs/heads/staging")
        assert b"v2" in on_staging.tree(staging).blobs[0][1]


def test_sub_path_reads_only_that_directory(remote: Remote, tmp_path: Path) -> None:
    sha = remote.commit(
        {"clusters/prod/a.yaml": manifest("a"), "clusters/dev/b.yaml": manifest("b"), "README.md": "hi"}
    )
    remote.push()
    with GitSource(remote.url, tmp_path / "cache", path="/clusters/prod/") as source:
        assert source.fetch().sha == sha
        assert names(source, sha) == ["clusters/prod/a.yaml"]
        gone = remote.commit({"clusters/prod/a.yaml": None}, "remove prod")
        remote.push()
        source.fetch()
        with pytest.raises(UserError, match=r"clusters/prod: no such directory"):
            source.tree(gone)  # a vanished directory is an error, never "delete everything"


def test_tag_pattern_follows_newest_semver_tag(remote: Remote, tmp_path: Path) -> None:
    shas = {}
    for tag in ["v1.2.0", "v1.10.0", "v1.9.3", "v2.0.0-rc.1", "other-9"]:
        shas[tag] = remote.commit({"a.yaml": manifest("a", tag)}, tag)
        remote.git("tag", "-a", "-m", tag, tag)  # annotated tags peel to their commit
    remote.git("push", "--quiet", "origin", "main", "--tags")
    with GitSource(remote.url, tmp_path / "cache", branch=None, tag_pattern="v*") as source:
        result = source.fetch()
        assert (result.ref, result.sha) == ("refs/tags/v1.10.0", shas["v1.10.0"])
        shas["v1.11.0"] = remote.commit({"a.yaml": manifest("a", "v1.11.0")}, "v1.11.0")
        remote.git("tag", "v1.11.0")  # lightweight works too
        remote.git("push", "--quiet", "origin", "v1.11.0")
        result = source.fetch()
        assert (result.ref, result.sha, result.forced) == ("refs/tags/v1.11.0", shas["v1.11.0"], False)
        remote.git("push", "--quiet", "--delete", "origin", "v1.11.0")
        result = source.fetch()  # a withdrawn release: back to the previous one, reported as a rewrite
        assert (result.ref, result.forced, result.previous) == ("refs/tags/v1.10.0", True, shas["v1.11.0"])
    with GitSource(remote.url, tmp_path / "rc", branch=None, tag_pattern="v*-rc*") as rc:
        assert rc.fetch().ref == "refs/tags/v2.0.0-rc.1"
    with (
        GitSource(remote.url, tmp_path / "none", branch=None, tag_pattern="release-*") as none,
        pytest.raises(RefNotFound, match="no tag matches 'release-\\*'"),
    ):
        none.fetch()


def test_force_push_is_reported_and_followed(remote: Remote, tmp_path: Path) -> None:
    base = remote.commit({"a.yaml": manifest("a")}, "base")
    remote.commit({"a.yaml": manifest("a", "v2")}, "to be rewritten")
    remote.push()
    with GitSource(remote.url, tmp_path / "cache") as source:
        dropped = source.fetch().sha
        remote.git("reset", "--quiet", "--hard", base)
        rewritten = remote.commit({"a.yaml": manifest("a", "v3")}, "rewritten")
        remote.push(force=True)
        result = source.fetch()
        assert (result.sha, result.previous, result.forced) == (rewritten, dropped, True)
        assert b"v3" in source.tree(rewritten).blobs[0][1]
        assert b"v2" in source.tree(dropped).blobs[0][1]  # the dropped commit stays readable for rollback
        cache = tmp_path / "cache"
        assert not is_ancestor(cache, dropped, rewritten) and is_ancestor(cache, base, rewritten)


def test_previous_from_the_caller_decides_forced(remote: Remote, tmp_path: Path) -> None:
    remote.commit({"a.yaml": manifest("a")}, "one")
    remote.push()
    unknown = "0" * 40  # e.g. a last good sha from state that this fresh cache never saw
    with GitSource(remote.url, tmp_path / "cache") as source:
        result = source.fetch(previous=unknown)
        assert (result.previous, result.forced) == (unknown, True)
        assert not source.fetch(previous=result.sha).forced


def test_remote_down_is_an_environment_problem_and_cache_survives(remote: Remote, tmp_path: Path) -> None:
    first = remote.commit({"a.yaml": manifest("a")})
    remote.push()
    with GitSource(remote.url, tmp_path / "cache") as source:
        source.fetch()
        moved = remote.server.with_name("away.git")
        remote.server.rename(moved)
        with pytest.raises(EnvironmentProblem) as caught:
            source.fetch()
        assert not isinstance(caught.value, RefNotFound)
        assert caught.value.exit_code == 4
        assert str(caught.value).startswith(f"{remote.url}: cannot fetch:")
        assert "does not appear to be a git repository" in str(caught.value)
        assert names(source, first) == ["a.yaml"]  # what was fetched is still readable
        moved.rename(remote.server)
        second = remote.commit({"b.yaml": manifest("b")})
        remote.push()
        assert source.fetch() == FetchResult(sha=second, ref="refs/heads/main", forced=False, previous=first)


def test_first_clone_of_an_unreachable_remote_leaves_nothing_behind(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with (
        GitSource((tmp_path / "missing.git").as_uri(), cache) as source,
        pytest.raises(EnvironmentProblem, match="cannot clone"),
    ):
        source.fetch()
    assert [p.name for p in tmp_path.iterdir()] == [".cache.lock"]


def test_vanished_branch_is_reported_and_last_fetch_kept(remote: Remote, tmp_path: Path) -> None:
    remote.commit({"a.yaml": manifest("a")})
    remote.push()
    remote.git("push", "--quiet", "origin", "main:release")
    with GitSource(remote.url, tmp_path / "cache", branch="release") as source:
        sha = source.fetch().sha
        remote.git("push", "--quiet", "--delete", "origin", "release")
        with pytest.raises(RefNotFound, match="branch 'release' does not exist on the remote") as caught:
            source.fetch()
        assert caught.value.exit_code == 4
        assert names(source, sha) == ["a.yaml"]


@pytest.mark.parametrize("new_commit", [True, False], ids=["new-commit", "same-commit"])
@pytest.mark.parametrize(
    "damage", ["garbage-head", "objects-deleted", "blob-lost", "foreign-repo", "plain-file"]
)
def test_damaged_or_foreign_cache_is_cloned_again(
    remote: Remote, tmp_path: Path, damage: str, new_commit: bool, caplog: pytest.LogCaptureFixture
) -> None:
    first = remote.commit({"a.yaml": manifest("a")})
    remote.push()
    cache = tmp_path / "cache"
    with GitSource(remote.url, cache) as source:
        source.fetch()
    if damage == "garbage-head":
        (cache / "HEAD").write_text("not a ref\n")
    elif damage == "objects-deleted":
        for item in (cache / "objects").rglob("*"):
            if item.is_file():
                item.unlink()
    elif damage == "blob-lost":  # commit and tree intact, one file's content gone: git fetch sees no problem
        blob = run_git(cache, "rev-parse", "main:a.yaml")
        (cache / "objects" / blob[:2] / blob[2:]).unlink()
    elif damage == "foreign-repo":
        run_git(cache, "config", "dra-gitops.url", "file:///elsewhere.git")
    else:
        shutil.rmtree(cache)
        cache.write_text("not a directory")
    expected = remote.commit({"b.yaml": manifest("b")}) if new_commit else first
    remote.push()
    with GitSource(remote.url, cache) as source:
        assert source.fetch().sha == expected
        assert names(source, expected) == (["a.yaml", "b.yaml"] if new_commit else ["a.yaml"])
        assert is_ancestor(cache, first, expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".cache.lock", "cache", "remote"]  # no leftovers
    if damage == "blob-lost" and not new_commit:  # nothing to fetch, so only our check finds it
        assert "the cache lacks objects" in caplog.text


def test_leftovers_of_a_killed_fetch_do_not_block(remote: Remote, tmp_path: Path) -> None:
    remote.commit({"a.yaml": manifest("a")})
    remote.push()
    cache = tmp_path / "cache"
    with GitSource(remote.url, cache) as source:
        source.fetch()
        (cache / "refs" / "heads" / "main.lock").write_text("")  # as left by a git killed mid-update
        (cache / "packed-refs.lock").write_text("")
        half_clone = tmp_path / ".cache.new-abc"
        (half_clone / "objects").mkdir(parents=True)
        second = remote.commit({"b.yaml": manifest("b")})
        remote.push()
        assert source.fetch().sha == second
        assert not half_clone.exists()


def test_concurrent_fetches_share_one_cache(remote: Remote, tmp_path: Path) -> None:
    sha = remote.commit({"a.yaml": manifest("a")})
    remote.push()
    cache = tmp_path / "cache"
    results: list[str] = []
    errors: list[BaseException] = []

    def fetch_and_read() -> None:
        try:
            with GitSource(remote.url, cache) as source:
                for _ in range(3):
                    fetched = source.fetch().sha
                    results.append(fetched)
                    assert names(source, fetched) == ["a.yaml"]
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=fetch_and_read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert results == [sha] * 12


def test_constructor_refuses_ambiguous_or_hostile_input(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="either a branch or a tag pattern"):
        GitSource("file:///x.git", tmp_path / "c", branch="main", tag_pattern="v*")
    with pytest.raises(UserError, match="not a valid branch name"):
        GitSource("file:///x.git", tmp_path / "c", branch="main:refs/heads/other")
    with pytest.raises(UserError, match="must not be empty or start with '-'"):
        GitSource("--upload-pack=touch /tmp/pwned", tmp_path / "c")


def test_reading_before_any_fetch_is_a_clear_error(tmp_path: Path) -> None:
    with (
        GitSource("file:///nowhere.git", tmp_path / "cache") as source,
        pytest.raises(EnvironmentProblem, match="the cache is empty: fetch first"),
    ):
        source.tree("0" * 40)


def test_tree_of_a_sha_the_cache_never_had_is_fetched_by_id(remote: Remote, tmp_path: Path) -> None:
    base = remote.commit({"a.yaml": manifest("a")}, "base")
    dropped = remote.commit({"a.yaml": manifest("a", "v2")}, "last good, later force-pushed away")
    remote.push()
    remote.git("reset", "--quiet", "--hard", base)
    remote.commit({"a.yaml": manifest("a", "v3")}, "rewritten")
    remote.push(force=True)
    with GitSource(remote.url, tmp_path / "fresh-cache") as source:  # e.g. a restarted pod: empty cache
        assert source.fetch(previous=dropped).forced
        assert b"v2" in source.tree(dropped).blobs[0][1]
        with pytest.raises(
            EnvironmentProblem, match=f"commit {'1' * 40} is not in the cache and cannot be fetched"
        ):
            source.tree("1" * 40)
