"""Commit signatures checked against an allowed GPG keyring or SSH allowed-signers file, on real commits."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from gitrepos import Remote, manifest, run_git

from reconciler.source.remote import GitSource
from reconciler.source.signatures import SignaturePolicy

needs_gpg = pytest.mark.skipif(
    shutil.which("gpg") is None, reason="gpg is not installed (Debian package: gpg, or gnupg)"
)
needs_ssh_keygen = pytest.mark.skipif(
    shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed (Debian package: openssh-client)"
)


class GpgKey:
    """A throw-away GnuPG home with one signing key, and its public key exported to a keyring file."""

    def __init__(self, root: Path, email: str) -> None:
        self.home = root / f"gnupg-{email.split('@')[0]}"
        self.home.mkdir(mode=0o700, parents=True)
        self.email = email
        self.gpg("--quick-gen-key", "--passphrase", "", f"Dev <{email}>", "ed25519", "sign", "never")
        self.fingerprint = next(
            line.split(":")[9]
            for line in self.gpg("--with-colons", "--list-secret-keys").splitlines()
            if line.startswith("fpr:")
        )
        self.keyring = root / f"{email}.asc"
        self.keyring.write_text(self.gpg("--armor", "--export", email))

    def gpg(self, *args: str) -> str:
        command = ["gpg", "--batch", "--homedir", str(self.home), "--pinentry-mode", "loopback", *args]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout

    def sign_args(self) -> tuple[str, ...]:
        return (
            "-c",
            "gpg.format=openpgp",
            "-c",
            f"user.signingkey={self.fingerprint}",
            "-c",
            "commit.gpgsign=true",
        )

    def env(self) -> dict[str, str]:
        return {"GNUPGHOME": str(self.home)}

    def close(self) -> None:
        subprocess.run(
            ["gpgconf", "--homedir", str(self.home), "--kill", "all"], check=False, capture_output=True
        )


class SshKey:
    def __init__(self, root: Path, name: str) -> None:
        self.private = root / f"ssh-{name}"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(self.private)], check=True
        )
        self.public = self.private.with_suffix(".pub")
        self.principal = f"{name}@example.com"

    def sign_args(self) -> tuple[str, ...]:
        return ("-c", "gpg.format=ssh", "-c", f"user.signingkey={self.private}", "-c", "commit.gpgsign=true")

    def allowed_line(self) -> str:
        return f"{self.principal} {self.public.read_text().strip()}\n"


def commit_signed(remote: Remote, name: str, sign: tuple[str, ...], env: dict[str, str] | None = None) -> str:
    (remote.work / f"{name}.yaml").write_text(manifest(name))
    remote.git("add", "-A")
    remote.git(*sign, "commit", "--quiet", "-m", name, env=env)
    return remote.head()


def tampered_copy(remote: Remote, sha: str) -> str:
    """A commit object carrying `sha`'s signature over a changed message: the signature no longer matches."""
    raw = run_git(remote.work, "cat-file", "commit", sha) + "\n"
    header, message = raw.split("\n\n", 1)  # signature lines inside the header never hold an empty line
    forged = f"{header}\n\nforged: {message}"
    out = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
        cwd=remote.work,
        input=forged,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    remote.git("update-ref", "refs/heads/main", out)
    return out


@needs_gpg
def test_gpg_signatures(remote: Remote, tmp_path: Path) -> None:
    allowed, stranger = GpgKey(tmp_path, "alice@example.com"), GpgKey(tmp_path, "mallory@example.com")
    try:
        unsigned = remote.commit({"a.yaml": manifest("a")}, "unsigned")
        good = commit_signed(remote, "good", allowed.sign_args(), allowed.env())
        foreign = commit_signed(remote, "foreign", stranger.sign_args(), stranger.env())
        remote.push()
        tampered = tampered_copy(remote, good)
        remote.git("push", "--quiet", "origin", f"{tampered}:refs/heads/tampered")
        policy = SignaturePolicy(gpg_keyring=allowed.keyring)
        with GitSource(remote.url, tmp_path / "cache", signatures=policy) as source:
            source.fetch()
            ok = source.verify(good)
            assert (ok.ok, ok.status, ok.format) == (True, "ok", "gpg")
            assert ok.signer == "Dev <alice@example.com>" and ok.key == allowed.fingerprint

            none = source.verify(unsigned)
            assert (none.ok, none.status, none.reason) == (False, "unsigned", "the commit is not signed")

            other = source.verify(foreign)
            assert (other.ok, other.status) == (False, "unknown-key")
            assert (
                stranger.fingerprint.endswith(str(other.key)) and "not in the allowed keyring" in other.reason
            )

        with GitSource(remote.url, tmp_path / "tampered", branch="tampered", signatures=policy) as source:
            bad = source.verify(source.fetch().sha)
            assert (bad.ok, bad.status) == (False, "bad") and "does not match" in bad.reason
    finally:
        allowed.close()
        stranger.close()


@needs_ssh_keygen
def test_ssh_signatures(remote: Remote, tmp_path: Path) -> None:
    allowed, stranger = SshKey(tmp_path, "alice"), SshKey(tmp_path, "mallory")
    signers = tmp_path / "allowed_signers"
    signers.write_text(allowed.allowed_line())
    unsigned = remote.commit({"a.yaml": manifest("a")}, "unsigned")
    good = commit_signed(remote, "good", allowed.sign_args())
    foreign = commit_signed(remote, "foreign", stranger.sign_args())
    remote.push()
    policy = SignaturePolicy(ssh_allowed_signers=signers)
    with GitSource(remote.url, tmp_path / "cache", signatures=policy) as source:
        source.fetch()
        ok = source.verify(good)
        assert (ok.ok, ok.status, ok.format, ok.signer) == (True, "ok", "ssh", "alice@example.com")
        assert str(ok.key).startswith("SHA256:")
        assert source.verify(unsigned).status == "unsigned"
        other = source.verify(foreign)
        assert (other.ok, other.status) == (False, "unknown-key")
        assert "not in the allowed signers file" in other.reason
        tampered = tampered_copy(remote, good)
        remote.git("push", "--quiet", "origin", f"{tampered}:refs/heads/tampered")
    with GitSource(remote.url, tmp_path / "tampered", branch="tampered", signatures=policy) as source:
        bad = source.verify(source.fetch().sha)
        assert (bad.ok, bad.status, bad.signer) == (False, "bad", None), bad

    gpg_only = SignaturePolicy(gpg_keyring=tmp_path / "unused.asc")
    with GitSource(remote.url, tmp_path / "cache2", signatures=gpg_only) as source:
        source.fetch()
        wrong_kind = source.verify(good)  # an SSH signature is not accepted by a GPG-only policy
        assert (wrong_kind.ok, wrong_kind.status) == (False, "unknown-key")


def test_without_a_policy_every_commit_is_accepted(remote: Remote, tmp_path: Path) -> None:
    sha = remote.commit({"a.yaml": manifest("a")})
    remote.push()
    with GitSource(remote.url, tmp_path / "cache") as source:
        source.fetch()
        check = source.verify(sha)
        assert (check.ok, check.reason) == (True, "signature verification is off")
