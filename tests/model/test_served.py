"""The offline table of which release serves which built-in kind in which version (reconciler/model/served.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.errors import UserError
from reconciler.model.served import kind_on_release, parse_release, release_doc, version_key

REPO = Path(__file__).resolve().parents[2]
DRA = "resource.k8s.io"
FOUR = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")

# The resource.k8s.io version matrix of the DRA reference, per release: version -> kinds.
DRA_MATRIX: dict[int, dict[str, set[str]]] = {
    26: {"v1alpha1": {"ResourceClass", "ResourceClaim", "ResourceClaimTemplate", "PodScheduling"}},
    **{
        minor: {
            "v1alpha2": {"ResourceClass", "ResourceClaim", "ResourceClaimTemplate", "PodSchedulingContext"}
        }
        for minor in (27, 28, 29)
    },
    30: {
        "v1alpha2": {
            "ResourceClass",
            "ResourceClaim",
            "ResourceClaimTemplate",
            "PodSchedulingContext",
            "ResourceSlice",
            "ResourceClaimParameters",
            "ResourceClassParameters",
        }
    },
    31: {"v1alpha3": {*FOUR, "PodSchedulingContext"}},
    32: {"v1alpha3": set(FOUR), "v1beta1": set(FOUR)},
    33: {"v1alpha3": {*FOUR, "DeviceTaintRule"}, "v1beta1": set(FOUR), "v1beta2": set(FOUR)},
    **{
        minor: {"v1": set(FOUR), "v1beta2": set(FOUR), "v1beta1": set(FOUR), "v1alpha3": {"DeviceTaintRule"}}
        for minor in (34, 35)
    },
    36: {
        "v1": set(FOUR),
        "v1beta2": {*FOUR, "DeviceTaintRule"},
        "v1beta1": set(FOUR),
        "v1alpha3": {"DeviceTaintRule", "ResourcePoolStatusRequest"},
    },
    37: {
        "v1": {*FOUR, "DeviceTaintRule"},
        "v1beta2": {*FOUR, "DeviceTaintRule"},
        "v1beta1": set(FOUR),
        "v1alpha3": {"DeviceTaintRule", "ResourcePoolStatusRequest"},
    },
}
DRA_KINDS = sorted(
    {kind for versions in DRA_MATRIX.values() for kinds in versions.values() for kind in kinds}
)


def test_the_generated_table_is_current() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "served_table.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("minor", sorted(DRA_MATRIX))
def test_every_release_serves_the_dra_kinds_of_the_reference(minor: int) -> None:
    found: dict[str, set[str]] = {}
    for kind in DRA_KINDS:
        facts = kind_on_release(DRA, kind, minor)
        assert facts is not None
        for version in facts.versions:
            found.setdefault(version, set()).add(kind)
    assert found == DRA_MATRIX[minor]


@pytest.mark.parametrize("minor", sorted(DRA_MATRIX))
def test_only_resource_k8s_io_v1_is_on_by_default(minor: int) -> None:
    for kind in DRA_KINDS:
        facts = kind_on_release(DRA, kind, minor)
        assert facts is not None
        defaults = {v for v, how in facts.versions.items() if how == "default"}
        assert defaults <= {"v1"}
        assert all(how == "opt-in" for v, how in facts.versions.items() if v != "v1")


def test_device_taint_rule_on_1_36_has_no_default_version() -> None:
    facts = kind_on_release(DRA, "DeviceTaintRule", 36)
    assert facts is not None
    assert facts.versions == {"v1beta2": "opt-in", "v1alpha3": "opt-in"}
    assert facts.next_default == (37, ["v1"])
    assert facts.deprecated == {"v1alpha3": "deprecated in 1.36, removal planned for 1.39"}
    on_137 = kind_on_release(DRA, "DeviceTaintRule", 37)
    assert on_137 is not None and on_137.versions["v1"] == "default"


def test_deprecated_betas_carry_their_schedule() -> None:
    facts = kind_on_release(DRA, "ResourceClaim", 36)
    assert facts is not None
    assert list(facts.versions) == ["v1", "v1beta2", "v1beta1"]
    assert facts.deprecated == {
        "v1beta2": "deprecated in 1.36, removal planned for 1.39",
        "v1beta1": "deprecated in 1.35, removal planned for 1.38",
    }
    before = kind_on_release(DRA, "ResourceClaim", 34)
    assert before is not None and before.deprecated == {}


def test_validating_admission_policy_versions_per_release() -> None:
    on_129 = kind_on_release("admissionregistration.k8s.io", "ValidatingAdmissionPolicy", 29)
    assert on_129 is not None
    assert on_129.versions == {"v1beta1": "opt-in", "v1alpha1": "opt-in"}
    assert on_129.next_default == (30, ["v1"])
    on_136 = kind_on_release("admissionregistration.k8s.io", "ValidatingAdmissionPolicy", 36)
    assert on_136 is not None and on_136.versions == {"v1": "default"}
    assert on_136.ranges == {"v1": "1.30-1.37", "v1beta1": "1.28-1.33", "v1alpha1": "1.26-1.31"}


def test_pod_group_is_alpha_on_1_36_and_absent_before() -> None:
    on_136 = kind_on_release("scheduling.k8s.io", "PodGroup", 36)
    assert on_136 is not None and on_136.versions == {"v1alpha2": "opt-in"} and on_136.next_default is None
    on_134 = kind_on_release("scheduling.k8s.io", "PodGroup", 34)
    assert on_134 is not None and on_134.versions == {}
    assert on_134.ranges == {"v1beta1": "1.37", "v1alpha3": "1.37", "v1alpha2": "1.36"}


def test_what_the_table_cannot_say_is_unknown() -> None:
    assert kind_on_release("example.com", "Widget", 36) is None
    assert kind_on_release("apps", "Deployment", 25) is None
    assert kind_on_release("apps", "Deployment", 38) is None
    # A beta kept on by default before the 1.24 policy: not guessed.
    facts = kind_on_release("flowcontrol.apiserver.k8s.io", "FlowSchema", 28)
    assert facts is not None and facts.versions == {"v1beta3": "unknown", "v1beta2": "unknown"}


def test_release_doc_lists_only_known_kinds() -> None:
    doc = release_doc([(DRA, "DeviceTaintRule"), ("example.com", "Widget"), ("apps", "Deployment")], 36)
    assert doc["version"] == "1.36" and doc["known"] is True
    assert set(doc["kinds"]) == {DRA, "apps"}
    assert doc["kinds"][DRA]["DeviceTaintRule"] == {
        "versions": {"v1beta2": "opt-in", "v1alpha3": "opt-in"},
        "default": [],
        "opt_in": ["v1beta2", "v1alpha3"],
        "ranges": {"v1": "1.37", "v1beta2": "1.36-1.37", "v1alpha3": "1.33-1.37"},
        "next_default": {"release": "1.37", "versions": ["v1"]},
        "deprecated": {"v1alpha3": "deprecated in 1.36, removal planned for 1.39"},
    }
    assert release_doc([("apps", "Deployment")], 40) == {"version": "1.40", "known": False, "kinds": {}}


def test_parse_release() -> None:
    assert parse_release("1.36") == 36
    assert parse_release("v1.33.1-gke.100") == 33
    with pytest.raises(UserError) as error:
        parse_release(1.3)  # YAML reads `1.30` as the float 1.3
    assert str(error.value).startswith("params.kubernetes_version: 1.3 is not a Kubernetes release")
    assert 'write it as a string, e.g. "1.36"' in str(error.value)
    with pytest.raises(UserError):
        parse_release("thirty-six")


def test_versions_sort_most_stable_first() -> None:
    versions = ["v1alpha3", "v1beta1", "v1", "v1beta2", "v2", "v1alpha1"]
    assert sorted(versions, key=version_key) == ["v2", "v1", "v1beta2", "v1beta1", "v1alpha3", "v1alpha1"]
