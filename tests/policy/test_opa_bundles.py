"""Bundles as OPA loads them: what `dra-gitops policy bundle` writes, and the stand-in's model of OPA.

Each stand-in behaviour is pinned to what OPA's documentation says (management-bundles: signing, roots,
activation; policy-language and the compiler's errors), or, for the type checker's "match error", to what
OPA 1.9 did with served_versions_test.rego (issue 30).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from opa_compiler import compile_modules
from opa_standin import BundleRejected, StandInServer, call, read_tar_gz, serve_opa_standin
from opa_support import bundle_of, bundled_test_count

from reconciler.cli import cli
from reconciler.errors import PolicyError
from reconciler.policy.bundle import MANIFEST, SIGNATURES, build_bundle, sign, tar_gz, verify
from reconciler.policy.engine import load_policy_set
from reconciler.policy.opa import run_policy_tests_on_opa

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "policies"


def _key_pair() -> tuple[bytes, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


@pytest.fixture(scope="module")
def keys() -> tuple[bytes, bytes]:
    return _key_pair()


def test_the_bundle_has_a_manifest_with_root_dra_and_its_revision() -> None:
    bundle = build_bundle(load_policy_set([EXAMPLES]))
    files = read_tar_gz(tar_gz(bundle))
    manifest = json.loads(files[MANIFEST])
    assert manifest == {"revision": bundle.revision, "roots": ["dra"], "rego_version": 1}
    assert "bundled/capacity/capacity.rego" in files and "policy-1/max-devices-per-request/" in " ".join(
        files
    )
    assert json.loads(files["dra/params/data.json"])["kubernetes_version"] == "1.36"
    assert tar_gz(bundle) == tar_gz(build_bundle(load_policy_set([EXAMPLES])))  # reproducible bytes


def test_a_signed_bundle_lists_every_file_with_its_sha256(keys: tuple[bytes, bytes]) -> None:
    import jwt

    private, public = keys
    bundle = build_bundle(load_policy_set([]))
    signatures = json.loads(sign(bundle, private))
    (token,) = signatures["signatures"]
    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    payload = jwt.decode(token, public, algorithms=["RS256"])
    assert sorted(f["name"] for f in payload["files"]) == sorted(bundle.files)
    assert {f["algorithm"] for f in payload["files"]} == {"SHA-256"}
    verify({**bundle.files, SIGNATURES: sign(bundle, private)}, public)


def test_the_server_with_a_verification_key_loads_only_what_that_key_signed(
    keys: tuple[bytes, bytes],
) -> None:
    # management-bundles, "Signing": with a verification key configured OPA refuses a bundle without
    # .signatures.json, with a file the signature does not list or whose hash differs, or signed by
    # another key; the bundle that was active stays.
    private, public = keys
    bundle = build_bundle(load_policy_set([]))
    signed = tar_gz(bundle, sign(bundle, private))
    with serve_opa_standin(signed, verification_key=public) as server:
        revision = server.state.bundles["dra-gitops"]["manifest"]["revision"]
        assert revision == bundle.revision
        with pytest.raises(BundleRejected, match="missing .signatures.json"):
            server.activate(tar_gz(bundle))
        other, _ = _key_pair()
        with pytest.raises(BundleRejected, match="verify"):
            server.activate(tar_gz(bundle, sign(bundle, other)))
        files = dict(bundle.files)
        files["bundled/capacity/capacity.rego"] += b"\n# changed after signing\n"
        tampered = type(bundle)(files, bundle.revision)
        with pytest.raises(BundleRejected, match="digest mismatch"):
            server.activate(tar_gz(tampered, sign(bundle, private)))
        assert server.state.bundles["dra-gitops"]["manifest"]["revision"] == revision


def test_a_bundle_with_a_package_outside_its_roots_is_refused(
    opa_server: StandInServer, tmp_path: Path
) -> None:
    # management-bundles, "Bundle file format": OPA refuses a bundle whose policies or data lie outside
    # the manifest's roots.
    bundle = build_bundle(load_policy_set([]))
    files = {**bundle.files, "lib/lib.rego": b"package lib\n\nx := 1\n"}
    with pytest.raises(BundleRejected, match="do not permit 'package lib'"):
        opa_server.activate(tar_gz(type(bundle)(files, bundle.revision)))
    files = {**bundle.files, "other/data.json": b"{}"}
    with pytest.raises(BundleRejected, match="do not permit data at path '/other'"):
        opa_server.activate(tar_gz(type(bundle)(files, bundle.revision)))


COMPILE_ERRORS = {
    # The compiler's conflict checks (policy-language, "Rules"): kinds of one rule must agree.
    "two defaults": ("default x := 1\n", "default x := 2\n", "multiple default rules"),
    "single against multi-value": ("x := 1\n", "x contains 2\n", "conflicting rules"),
    "function against rule": ("x := 1\n", "x(a) := a\n", "conflicting rules"),
    # Type checking (policy-language, "Functions"/"Built-in Functions"): an unknown function or a call
    # with the wrong number of arguments is a rego_type_error when the module is compiled.
    "undefined function": ("x := nosuch(1)\n", "", "undefined function nosuch"),
    "arity": ("f(a) := a\n", "y := f(1, 2)\n", "arity mismatch"),
    # OPA 1.9's type checker on served_versions_test.rego:72 (issue 30): rego_type_error: match error.
    "object comprehension over a literal in a function": (
        'f(v) := {k: v | some k in ["a", "b"]}\n',
        "",
        "match error",
    ),
}


@pytest.mark.parametrize("case", sorted(COMPILE_ERRORS))
def test_the_stand_in_refuses_what_opas_compiler_refuses(case: str) -> None:
    first, second, message = COMPILE_ERRORS[case]
    modules = {"a.rego": f"package dra.t\n\n{first}"}
    if second:
        modules["b.rego"] = f"package dra.t\n\n{second}"
    compile_modules({"ok.rego": "package dra.t\n\nz := 1\n"})
    with pytest.raises(Exception, match=message) as error:
        compile_modules(modules)
    assert error.value.error["code"] == "rego_type_error"  # type: ignore[attr-defined]


def test_the_literal_object_opa_accepts_compiles() -> None:
    compile_modules({"a.rego": 'package dra.t\n\nf(v) := {"a": v, "b": v}\n\nx := f(1)\n'})
    text = (REPO / "policies" / "served-versions" / "served_versions_test.rego").read_text()
    compile_modules(
        {
            "v.rego": (REPO / "policies" / "served-versions" / "served_versions.rego").read_text(),
            "t.rego": text,
        }
    )


def test_the_server_reports_its_bundles_revision(opa_url: str) -> None:
    revision = build_bundle(load_policy_set([])).revision
    status, answer = call(opa_url, "GET", "/v1/data/system/bundles")
    assert status == 200
    assert [info["manifest"]["revision"] for info in answer["result"].values()] == [revision]
    status, answer = call(opa_url, "GET", "/v1/status")
    if status == 200:  # the status API, when the server has it
        assert [b["active_revision"] for b in answer["result"]["bundles"].values()] == [revision]


def test_policy_bundle_writes_what_check_expects(tmp_path: Path, keys: tuple[bytes, bytes]) -> None:
    private, public = keys
    (tmp_path / "key.pem").write_bytes(private)
    out = tmp_path / "bundle.tar.gz"
    result = CliRunner().invoke(
        cli,
        [
            "policy",
            "bundle",
            "-o",
            str(out),
            "--policy-dir",
            str(EXAMPLES),
            "--signing-key",
            str(tmp_path / "key.pem"),
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    revision = build_bundle(load_policy_set([EXAMPLES])).revision
    assert result.output.strip() == revision
    files = read_tar_gz(out.read_bytes())
    verify(files, public)
    with serve_opa_standin(out.read_bytes(), verification_key=public) as server:
        assert server.state.bundles["dra-gitops"]["manifest"]["revision"] == revision
    assert out.read_bytes() != bundle_of()


def test_a_bad_signing_key_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "key.pem").write_text("not a key")
    with pytest.raises(PolicyError, match="cannot sign"):
        sign(build_bundle(load_policy_set([])), b"not a key")
    result = CliRunner().invoke(
        cli,
        ["policy", "bundle", "-o", str(tmp_path / "b.tar.gz"), "--signing-key", str(tmp_path / "key.pem")],
    )
    assert result.exit_code == 1 and "cannot sign" in result.output
    assert not (tmp_path / "b.tar.gz").exists()


def test_the_overlays_bundle_build_writes_what_its_opa_loads_and_the_reconciler_expects(
    tmp_path: Path,
) -> None:
    import yaml

    patch = yaml.safe_load((REPO / "deploy" / "overlays" / "opa" / "opa-sidecar.yaml").read_text())
    build, opa = patch["spec"]["template"]["spec"]["initContainers"]
    bundle_path = opa["args"][opa["args"].index("--bundle") + 1]
    args = [a.replace(bundle_path, str(tmp_path / "bundle.tar.gz")) for a in build["args"]]
    result = CliRunner().invoke(cli, [*args, "-q"])
    assert result.exit_code == 0, result.output
    with serve_opa_standin((tmp_path / "bundle.tar.gz").read_bytes()) as server:
        report = run_policy_tests_on_opa(server.url, [])  # the reconciler's policies: the bundled pack
        assert report.ok and report.passed == bundled_test_count()
