"""Is a commit signed by an allowed key? GPG (a keyring of public keys) or SSH (an allowed-signers file).

`git verify-commit` does the cryptography; this module gives it a private GnuPG home holding only the
allowed keys (so the operator's own keyring never counts) and turns its output into a record the reconciler
can store and show.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from reconciler.errors import UserError
from reconciler.source.gitcmd import GitRunner

SignatureStatus = Literal["ok", "unsigned", "bad", "unknown-key", "unverifiable"]

_SSH_GOOD = re.compile(r'Good "git" signature for (?P<signer>.+?) with (?P<type>\S+) key (?P<key>\S+)')
_SSH_NOVALIDATE = re.compile(r'Good "git" signature with (?P<type>\S+) key (?P<key>\S+)')


@dataclass(frozen=True)
class SignaturePolicy:
    """Which keys may sign the commits that get applied. Set one or both; a commit must match its format."""

    gpg_keyring: Path | None = None  # exported public keys (armored or binary)
    ssh_allowed_signers: Path | None = None  # the format of gpg.ssh.allowedSignersFile


@dataclass(frozen=True)
class SignatureCheck:
    """The verdict on one commit's signature; `ok` is the only status that may be applied."""

    sha: str
    status: SignatureStatus
    reason: str
    signer: str | None = None  # GPG user id or SSH principal
    key: str | None = None  # GPG fingerprint / key id, or SSH key fingerprint
    format: str | None = None  # "gpg", "ssh", "x509"

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def signature_format(signature: str) -> str | None:
    if not signature:
        return None
    if "BEGIN SSH SIGNATURE" in signature:
        return "ssh"
    if "BEGIN SIGNED MESSAGE" in signature:
        return "x509"
    return "gpg"


def _gpg_status(sha: str, output: str, exit_status: int) -> SignatureCheck:
    lines: dict[str, list[str]] = {}
    for line in output.splitlines():
        if line.startswith("[GNUPG:] "):
            word, _, rest = line[len("[GNUPG:] ") :].partition(" ")
            lines.setdefault(word, []).append(rest)
    fingerprint = lines["VALIDSIG"][0].split(" ", 1)[0] if "VALIDSIG" in lines else None

    def who(word: str) -> tuple[str | None, str | None]:
        key_id, _, uid = lines[word][0].partition(" ")
        return (uid or None), (fingerprint or key_id)

    if "GOODSIG" in lines and exit_status == 0:
        signer, key = who("GOODSIG")
        return SignatureCheck(sha, "ok", "good GPG signature by an allowed key", signer, key, "gpg")
    for word, reason in (
        ("BADSIG", "GPG signature does not match the commit (tampered or corrupt)"),
        ("EXPKEYSIG", "GPG signature made by an expired key"),
        ("REVKEYSIG", "GPG signature made by a revoked key"),
        ("EXPSIG", "GPG signature has expired"),
    ):
        if word in lines:
            signer, key = who(word)
            return SignatureCheck(sha, "bad", reason, signer, key, "gpg")
    if "NO_PUBKEY" in lines or "ERRSIG" in lines:
        key_id = (lines.get("NO_PUBKEY") or lines["ERRSIG"])[0].split(" ", 1)[0]
        return SignatureCheck(
            sha,
            "unknown-key",
            f"signed by GPG key {key_id}, which is not in the allowed keyring",
            None,
            key_id,
            "gpg",
        )
    detail = (
        output.strip().splitlines()[-1] if output.strip() else f"git verify-commit exited with {exit_status}"
    )
    return SignatureCheck(sha, "bad", f"GPG signature not accepted: {detail}", None, fingerprint, "gpg")


def _ssh_status(sha: str, output: str, exit_status: int) -> SignatureCheck:
    good = _SSH_GOOD.search(output)
    if good is not None and exit_status == 0:
        return SignatureCheck(
            sha, "ok", "good SSH signature by an allowed signer", good["signer"], good["key"], "ssh"
        )
    unvalidated = _SSH_NOVALIDATE.search(output)
    if unvalidated is not None:
        reason = f"signed by SSH key {unvalidated['key']}, which is not in the allowed signers file"
        return SignatureCheck(sha, "unknown-key", reason, None, unvalidated["key"], "ssh")
    detail = (
        "; ".join(line.strip() for line in output.splitlines() if line.strip())
        or f"exit status {exit_status}"
    )
    return SignatureCheck(sha, "bad", f"SSH signature not accepted: {detail}", None, None, "ssh")


class SignatureVerifier:
    """Verifies commits of one cache repository against a SignaturePolicy."""

    def __init__(self, policy: SignaturePolicy, runner: GitRunner) -> None:
        self.policy = policy
        self._runner = runner
        self._lock = threading.Lock()
        self._gnupg_home: Path | None = None
        self._imported: tuple[int, int] | None = None  # (mtime_ns, size) of the keyring last imported

    def _home_with_keyring(self, keyring: Path) -> Path:
        """A private GnuPG home holding exactly the keyring's keys, re-imported when the file changes."""
        try:
            stat = keyring.stat()
        except OSError as exc:
            raise UserError(f"cannot read the GPG keyring ({exc.strerror})", where=str(keyring)) from exc
        stamp = (stat.st_mtime_ns, stat.st_size)
        if self._gnupg_home is not None and self._imported == stamp:
            return self._gnupg_home
        home = Path(tempfile.mkdtemp(prefix="dra-gitops-gnupg-"))  # mode 0700, as gpg requires
        weakref.finalize(self, shutil.rmtree, home, ignore_errors=True)
        result = subprocess.run(
            ["gpg", "--batch", "--quiet", "--no-tty", "--homedir", str(home), "--import", str(keyring)],
            capture_output=True,
            text=True,
            timeout=self._runner.timeout,
        )
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["gpg failed"])[-1]
            raise UserError(f"cannot import the GPG keyring: {last}", where=str(keyring))
        if self._gnupg_home is not None:
            shutil.rmtree(self._gnupg_home, ignore_errors=True)
        self._gnupg_home, self._imported = home, stamp
        return home

    def verify(self, repo_dir: Path, sha: str, signature: str) -> SignatureCheck:
        """Check the commit `sha` whose raw signature header is `signature` (empty when unsigned)."""
        kind = signature_format(signature)
        if kind is None:
            return SignatureCheck(sha, "unsigned", "the commit is not signed")
        if kind == "x509":
            return SignatureCheck(sha, "unverifiable", "X.509 signatures are not supported", format="x509")
        if kind == "gpg":
            return self._verify_gpg(repo_dir, sha)
        return self._verify_ssh(repo_dir, sha)

    def _verify_gpg(self, repo_dir: Path, sha: str) -> SignatureCheck:
        keyring = self.policy.gpg_keyring
        if keyring is None:
            return SignatureCheck(
                sha, "unknown-key", "GPG-signed, but no GPG keyring is allowed", format="gpg"
            )
        if shutil.which("gpg") is None:
            return SignatureCheck(sha, "unverifiable", "gpg is not installed", format="gpg")
        with self._lock:
            home = self._home_with_keyring(keyring)
        args = ["-c", "gpg.program=gpg", "-c", "gpg.minTrustLevel=undefined", "verify-commit", "--raw", sha]
        status, out, err = self._runner.execute(args, cwd=repo_dir, extra_env={"GNUPGHOME": str(home)})
        return _gpg_status(sha, out + err, status)

    def _verify_ssh(self, repo_dir: Path, sha: str) -> SignatureCheck:
        allowed = self.policy.ssh_allowed_signers
        if allowed is None:
            return SignatureCheck(
                sha, "unknown-key", "SSH-signed, but no allowed signers file is set", format="ssh"
            )
        if not allowed.is_file():
            raise UserError("the SSH allowed signers file does not exist", where=str(allowed))
        if shutil.which("ssh-keygen") is None:
            return SignatureCheck(sha, "unverifiable", "ssh-keygen is not installed", format="ssh")
        args = ["-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={allowed}"]
        args += ["-c", "gpg.minTrustLevel=undefined", "verify-commit", "--raw", sha]
        status, out, err = self._runner.execute(args, cwd=repo_dir)
        return _ssh_status(sha, out + err, status)
