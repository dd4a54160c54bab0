"""Tests for reconciler.model.loader: locations, file walking, limits and hostile input."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.errors import ManifestError, NotAnObject, UserError
from reconciler.model.loader import (
    DEFAULT_LIMITS,
    Limits,
    deduplicate,
    is_manifest_file,
    load_blobs,
    load_paths,
    load_repo_config,
    parse_documents,
)
from reconciler.model.objects import (
    Manifest,
    ObjRef,
    api_group,
    api_version_only,
    ref_of,
)


def cm(name: str, namespace: str | None = None) -> str:
    ns = f"\n  namespace: {namespace}" if namespace else ""
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}{ns}\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def locations(manifests: list[Manifest]) -> list[tuple[str, str, int]]:
    return [(str(m.ref), m.path, m.line) for m in manifests]


class raises_at:  # noqa: N801 - used like pytest.raises
    """Context manager: a ManifestError whose message starts with `where: ` and contains the fragments."""

    def __init__(self, where: str, *fragments: str) -> None:
        self.where = where
        self.fragments = fragments
        self.message = ""

    def __enter__(self) -> raises_at:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        assert exc is not None, f"no ManifestError raised (expected at {self.where})"
        assert isinstance(exc, ManifestError), repr(exc)
        message = self.message = str(exc)
        assert message.startswith(f"{self.where}: "), message
        assert exc.where == self.where
        for fragment in self.fragments:
            assert fragment in message, (fragment, message)
        return True


# --- parse_documents: locations ----------------------------------------------------------------------


MULTI = """\
# leading comment
# another comment

apiVersion: v1
kind: Namespace
metadata:
  name: gpu
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: one
  namespace: gpu
---

# comment inside the third document
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.example.com
--- # trailing comment on the separator
apiVersion: v1
kind: ConfigMap
metadata: {name: two}
"""


def test_multi_document_lines_follow_separators_and_comments() -> None:
    got = parse_documents(MULTI, "m/all.yaml")
    assert locations(got) == [
        ("Namespace/gpu", "m/all.yaml", 4),
        ("ConfigMap/gpu/one", "m/all.yaml", 9),
        ("DeviceClass/gpu.example.com", "m/all.yaml", 17),
        ("ConfigMap/default/two", "m/all.yaml", 22),
    ]
    assert [m.where for m in got] == ["m/all.yaml:4", "m/all.yaml:9", "m/all.yaml:17", "m/all.yaml:22"]


def test_document_starting_with_separator() -> None:
    got = parse_documents("---\n" + cm("a") + "---\n" + cm("b"), "f.yaml")
    assert [(m.ref.name, m.line) for m in got] == [("a", 2), ("b", 7)]


def test_empty_documents_are_skipped() -> None:
    text = "---\n---\n# only a comment\n---\n" + cm("a") + "---\n~\n---\nnull\n---\n"
    got = parse_documents(text, "f.yaml")
    assert [(m.ref.name, m.line) for m in got] == [("a", 5)]


@pytest.mark.parametrize("text", ["", "\n\n", "# nothing here\n", "---\n", "---\n...\n"])
def test_file_without_objects_gives_nothing(text: str) -> None:
    assert parse_documents(text, "f.yaml") == []


def test_list_kind_is_unpacked_with_item_lines() -> None:
    text = textwrap.dedent(
        """\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: before}
        ---
        apiVersion: v1
        kind: List
        metadata: {}
        items:
        - apiVersion: v1
          kind: ConfigMap
          metadata:
            name: first
        # a comment between items
        - apiVersion: resource.k8s.io/v1
          kind: DeviceClass
          metadata:
            name: second
        - {apiVersion: v1, kind: Secret, metadata: {name: third, namespace: ns}}
        """
    )
    got = parse_documents(text, "list.yaml")
    assert locations(got) == [
        ("ConfigMap/default/before", "list.yaml", 1),
        ("ConfigMap/default/first", "list.yaml", 9),
        ("DeviceClass/second", "list.yaml", 14),
        ("Secret/ns/third", "list.yaml", 18),
    ]
    # The List wrapper itself is not an object of the desired state.
    assert all(m.kind != "List" for m in got)


def test_typed_list_kind_is_unpacked() -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMapList\nitems:\n"
        "- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n"
        "- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n"
    )
    got = parse_documents(text, "l.yaml")
    assert [(m.ref.name, m.line) for m in got] == [("a", 4), ("b", 5)]


def test_empty_list_gives_nothing() -> None:
    assert parse_documents("apiVersion: v1\nkind: List\nitems: []\n", "l.yaml") == []
    assert parse_documents("apiVersion: v1\nkind: List\nitems:\n", "l.yaml") == []


def test_list_items_must_be_a_sequence() -> None:
    text = "\n" + "apiVersion: v1\nkind: List\nitems: {a: 1}\n"
    with raises_at("l.yaml:2", "`items` of a List must be a sequence"):
        parse_documents(text, "l.yaml")


def test_bad_list_item_is_reported_at_its_own_line() -> None:
    text = (
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: ConfigMap, metadata: {name: ok}}\n"
        "- {apiVersion: v1, kind: ConfigMap, metadata: {}}\n"
    )
    with raises_at("l.yaml:5", "metadata.name"):
        parse_documents(text, "l.yaml")
    with raises_at("l.yaml:4", "not a Kubernetes object"):
        parse_documents("apiVersion: v1\nkind: List\nitems:\n- just a string\n", "l.yaml")


def test_kind_ending_in_list_without_items_is_an_ordinary_object() -> None:
    got = parse_documents("apiVersion: example.com/v1\nkind: AllowList\nmetadata: {name: a}\n", "f.yaml")
    assert [str(m.ref) for m in got] == ["AllowList/default/a"]


def test_json_document() -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}, "data": {"k": "v"}}
    got = parse_documents(json.dumps(body, indent=2), "f.json")
    assert len(got) == 1
    assert got[0].body == body
    assert (got[0].path, got[0].line) == ("f.json", 1)


def test_bytes_and_str_give_the_same_result() -> None:
    as_str = parse_documents(MULTI, "f.yaml")
    as_bytes = parse_documents(MULTI.encode(), "f.yaml")
    assert locations(as_str) == locations(as_bytes)
    assert [m.body for m in as_str] == [m.body for m in as_bytes]


def test_body_is_the_manifest_as_written() -> None:
    text = cm("x") + "data:\n  a: '1'\n  b: |\n    line1\n    line2\n"
    (m,) = parse_documents(text, "f.yaml")
    assert m.body == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x"},
        "data": {"a": "1", "b": "line1\nline2\n"},
    }
    assert m.api_version == "v1"
    assert m.kind == "ConfigMap"


def test_timestamps_stay_strings() -> None:
    text = (
        cm("t")
        + "data:\n  date: 2024-01-01\n  stamp: 2024-01-01T10:00:00Z\n  spaced: 2001-12-14 21:59:43.10 -5\n"
    )
    (m,) = parse_documents(text, "f.yaml")
    assert m.body["data"] == {
        "date": "2024-01-01",
        "stamp": "2024-01-01T10:00:00Z",
        "spaced": "2001-12-14 21:59:43.10 -5",
    }
    json.dumps(m.body)  # the policy input must stay JSON


def test_other_scalars_keep_their_yaml_types() -> None:
    text = cm("t") + "spec:\n  n: 3\n  f: 1.5\n  b: true\n  nil: null\n  q: '3'\n"
    (m,) = parse_documents(text, "f.yaml")
    assert m.body["spec"] == {"n": 3, "f": 1.5, "b": True, "nil": None, "q": "3"}


def test_anchors_and_aliases_within_limits_work() -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
        "  labels: &l {app: x, tier: y}\n  annotations: *l\n"
    )
    (m,) = parse_documents(text, "f.yaml")
    assert m.body["metadata"]["annotations"] == {"app": "x", "tier": "y"}


# --- refs and namespaces -----------------------------------------------------------------------------


def test_namespaced_kind_defaults_to_default_namespace() -> None:
    (m,) = parse_documents(cm("a"), "f.yaml")
    assert m.ref == ObjRef("", "ConfigMap", "default", "a")
    assert str(m.ref) == "ConfigMap/default/a"
    assert (m.ref.namespace, m.ref.name) == ("default", "a")


def test_explicit_namespace_is_kept() -> None:
    (m,) = parse_documents(cm("a", "gpu-ns"), "f.yaml")
    assert m.ref == ObjRef("", "ConfigMap", "gpu-ns", "a")


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("v1", "Namespace"),
        ("resource.k8s.io/v1", "DeviceClass"),
        ("resource.k8s.io/v1alpha2", "ResourceClass"),
        ("resource.k8s.io/v1", "ResourceSlice"),
        ("resource.k8s.io/v1alpha3", "DeviceTaintRule"),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("scheduling.k8s.io/v1", "PriorityClass"),
    ],
)
def test_cluster_scoped_kinds_have_no_namespace(api_version: str, kind: str) -> None:
    text = f"apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: x\n  namespace: ignored\n"
    (m,) = parse_documents(text, "f.yaml")
    assert m.ref.namespace == ""
    assert str(m.ref) == f"{kind}/x"
    assert (m.ref.namespace, m.ref.name) == ("", "x")
    assert m.ref.group == api_group(api_version)


def test_ref_of_and_api_helpers() -> None:
    assert api_group("v1") == ""
    assert api_group("resource.k8s.io/v1beta1") == "resource.k8s.io"
    assert api_version_only("resource.k8s.io/v1beta1") == "v1beta1"
    assert api_version_only("v1") == "v1"
    body = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}}
    assert ref_of(body) == ObjRef("apps", "DaemonSet", "default", "d")
    assert ref_of(body, default_namespace="other") == ObjRef("apps", "DaemonSet", "other", "d")
    cls = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "g", "namespace": "x"},
    }
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}}
    assert ref_of(cls).namespace == "" and ref_of(claim).namespace == "default"


def test_ref_ignores_api_version_so_versions_are_the_same_object() -> None:
    a = ref_of({"apiVersion": "resource.k8s.io/v1beta1", "kind": "DeviceClass", "metadata": {"name": "g"}})
    b = ref_of({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "g"}})
    assert a == b


def test_manifest_labels_and_annotations_are_copies() -> None:
    text = cm("a") + "  labels: {x: '1'}\n  annotations: {y: '2'}\n"
    (m,) = parse_documents(text, "f.yaml")
    assert m.labels == {"x": "1"}
    assert m.annotations == {"y": "2"}
    m.labels["z"] = "3"
    assert m.body["metadata"]["labels"] == {"x": "1"}
    (bare,) = parse_documents(cm("b"), "f.yaml")
    assert bare.labels == {} and bare.annotations == {}


# --- parse_documents: errors -------------------------------------------------------------------------


def test_broken_yaml_reports_line_and_column() -> None:
    text = cm("ok") + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n  x: 1\n"
    with pytest.raises(ManifestError) as info:
        parse_documents(text, "dir/bad.yaml")
    message = str(info.value)
    assert message.startswith("dir/bad.yaml:"), message
    assert "invalid YAML" in message
    assert info.value.where is not None
    line, col = info.value.where.split(":")[1:]
    assert int(line) in (9, 10) and int(col) >= 1


def test_mapping_value_error_location() -> None:
    with raises_at("f.yaml:1:5", "invalid YAML", "mapping values are not allowed"):
        parse_documents("a: b: c\n", "f.yaml")


def test_undefined_alias_is_invalid_yaml() -> None:
    with raises_at("f.yaml:1:4", "invalid YAML"):
        parse_documents("a: *nope\n", "f.yaml")


def test_manifest_error_is_a_user_error() -> None:
    with pytest.raises(UserError):
        parse_documents("a: b: c\n", "f.yaml")


BILLION_LAUGHS = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: lol
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
j: &j [*i,*i,*i,*i,*i,*i,*i,*i,*i]
k: &k [*j,*j,*j,*j,*j,*j,*j,*j,*j]
l: &l [*k,*k,*k,*k,*k,*k,*k,*k,*k]
"""


def test_alias_bomb_is_refused_quickly() -> None:
    text = cm("fine") + "---\n" + BILLION_LAUGHS
    start = time.perf_counter()
    with raises_at("bomb.yaml:6", "alias"):
        parse_documents(text, "bomb.yaml")
    assert time.perf_counter() - start < 2.0


def test_alias_expansion_limit_is_configurable() -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
        "x: &x [1, 2, 3, 4, 5, 6, 7, 8]\ny: [*x, *x, *x, *x, *x, *x, *x, *x]\n"
    )
    assert len(parse_documents(text, "f.yaml")) == 1
    with raises_at("f.yaml:1", "more than 50 nodes"):
        parse_documents(text, "f.yaml", Limits(max_expanded_nodes=50))


@pytest.mark.parametrize(
    "value",
    [
        "[*x, *x]",  # after a flow indicator
        "[1,*x]",  # after a comma, no blank
        "{a: *x}",
        "\n  - *x",  # at a block sequence entry
        "\n  k: *x",  # a block mapping's value
    ],
)
def test_every_place_an_alias_may_stand_is_measured_against_the_limit(value: str) -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nx: &x [1, 2, 3, 4, 5, 6, 7, 8]\ny: "
        + value
        + "\n"
    )
    assert len(parse_documents(text, "f.yaml")) == 1
    with raises_at("f.yaml:1", "more than 12 nodes"):
        parse_documents(text, "f.yaml", Limits(max_expanded_nodes=12))


def test_cel_operators_are_no_aliases_and_take_the_fast_construction() -> None:
    """`&&` and `x * y` in a selector are text: the document is built without the alias bookkeeping (which
    costs a multiple on a repository of DeviceClasses) and to the same value."""
    expression = 'device.driver == "gpu.example.com" && device.capacity["gpu.example.com"].memory * 2 > 1'
    text = (
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: c\n"
        f"spec:\n  selectors:\n  - cel:\n      expression: {expression}\n"
    )
    (m,) = parse_documents(text, "f.yaml", Limits(max_expanded_nodes=1))  # never measured
    assert m.body["spec"]["selectors"][0]["cel"]["expression"] == expression


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(ManifestError) as info:
        parse_documents("- &a [*a]\n", "f.yaml")
    assert str(info.value).startswith("f.yaml:1: ")


def test_document_over_size_limit_is_refused_at_its_line() -> None:
    big = cm("big") + "data:\n  blob: '" + "x" * 500 + "'\n"
    text = cm("small") + "---\n" + big
    limits = Limits(max_document_bytes=200)
    assert len(parse_documents(cm("small"), "f.yaml", limits)) == 1
    with raises_at("f.yaml:6", "over the 200-byte limit"):
        parse_documents(text, "f.yaml", limits)


def test_default_document_limit_applies() -> None:
    blob = "x" * (DEFAULT_LIMITS.max_document_bytes + 10)
    with raises_at("f.yaml:1", f"over the {DEFAULT_LIMITS.max_document_bytes}-byte limit"):
        parse_documents(cm("big") + f"data:\n  blob: {blob}\n", "f.yaml")


def test_text_over_file_limit_is_refused() -> None:
    with raises_at("f.yaml:1", "over the 20-byte limit"):
        parse_documents(cm("a"), "f.yaml", Limits(max_file_bytes=20))


def _run_isolated(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Hostile parser input runs in a child: a crash must fail the test, not the test run."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout
    )


def test_deeply_nested_flow_collections_are_refused_without_crashing() -> None:
    proc = _run_isolated(
        """
        from reconciler.errors import ManifestError
        from reconciler.model.loader import parse_documents
        try:
            parse_documents("a: 1\\nb: " + "[" * 100000, "deep.yaml")
        except ManifestError as exc:
            print("REFUSED", exc)
        """
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.startswith("REFUSED deep.yaml:2: "), proc.stdout
    assert "nested deeper than 1000" in proc.stdout


def test_nested_flow_mappings_are_refused_too() -> None:
    with raises_at("f.yaml:1", "nested deeper than 10"):
        parse_documents("a: " + "{b: " * 20 + "1" + "}" * 20 + "\n", "f.yaml", Limits(max_flow_depth=10))


def test_flow_depth_within_limit_and_many_shallow_brackets_are_fine() -> None:
    shallow = cm("s") + "data:\n" + "".join(f"  k{i}: '[x]'\n" for i in range(1500))
    assert len(parse_documents(shallow, "f.yaml")) == 1
    nested = cm("n") + "spec:\n  v: " + "[" * 5 + "1" + "]" * 5 + "\n"
    assert parse_documents(nested, "f.yaml", Limits(max_flow_depth=5))[0].body["spec"]["v"] == [[[[[1]]]]]


@pytest.mark.parametrize(
    "unit",
    [
        "- ",  # `- - - x`: one block sequence per two bytes, 200 KB, far under every size limit
        "-  ",  # the same with two spaces between indicators
        "- ? ",  # sequence / complex-key mapping alternating
        "? - ",
    ],
)
def test_deeply_nested_compact_block_collections_are_refused_without_crashing(unit: str) -> None:
    proc = _run_isolated(
        f"""
        from reconciler.errors import ManifestError
        from reconciler.model.loader import parse_documents
        try:
            parse_documents({unit!r} * 100000 + "x\\n", "deep.yaml")
        except ManifestError as exc:
            print("REFUSED", exc)
        """
    )
    assert proc.returncode == 0, f"loader crashed with exit code {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.startswith("REFUSED deep.yaml:1: "), proc.stdout


@pytest.mark.parametrize(
    ("text", "kind_name"),
    [
        ("- a\n- b\n", "list"),
        ("just a string\n", "str"),
        ("42\n", "int"),
        ("true\n", "bool"),
    ],
)
def test_non_mapping_document_is_refused(text: str, kind_name: str) -> None:
    with raises_at("f.yaml:3", f"document is a {kind_name}, not a Kubernetes object"):
        parse_documents("---\n---\n" + text, "f.yaml")


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("kind: ConfigMap\nmetadata: {name: a}\n", "apiVersion"),
        ("apiVersion: v1\nmetadata: {name: a}\n", "kind"),
        ("apiVersion: v1\nkind: ConfigMap\n", "metadata.name"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", "metadata.name"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ''}\n", "metadata.name"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 7}\n", "metadata.name"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: [name]\n", "metadata.name"),
        ("apiVersion: ''\nkind: ConfigMap\nmetadata: {name: a}\n", "apiVersion"),
        ("apiVersion: 1\nkind: ConfigMap\nmetadata: {name: a}\n", "apiVersion"),
    ],
)
def test_missing_required_fields(text: str, missing: str) -> None:
    with raises_at("f.yaml:2", f"object is missing {missing}"):
        parse_documents("# header\n" + text, "f.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "replicaCount: 2\nimage: {tag: v1}\n",
            "not a Kubernetes object (no apiVersion, kind, metadata.name)",
        ),
        ("apiVersion: v2\nname: chart\nversion: 1.0.0\n", "not a Kubernetes object (no kind, metadata.name)"),
        ("metadata: {generateName: a-}\n", "not a Kubernetes object (no apiVersion, kind, metadata.name)"),
        (
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml]\n",
            "a kustomize file (apiVersion kustomize.config.k8s.io/v1beta1), not a Kubernetes object",
        ),
    ],
)
def test_a_document_of_another_tool_is_no_object(text: str, message: str) -> None:
    with pytest.raises(NotAnObject) as info:
        parse_documents("# header\n" + text, "f.yaml")
    assert str(info.value) == f"f.yaml:2: {message}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiversion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
            "key `apiversion` must be spelled `apiVersion`",
        ),
        ("apiVersion: v1\nKind: ConfigMap\nmetadata: {name: a}\n", "key `Kind` must be spelled `kind`"),
        (
            "apiVersion: v1\nkind: ConfigMap\nMetadata: {name: a}\n",
            "key `Metadata` must be spelled `metadata`",
        ),
        (
            "APIVERSION: v1\nKIND: ConfigMap\nmetadata: {name: a}\n",
            "key `APIVERSION` must be spelled `apiVersion`",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, Namespace: team}\n",
            "key `metadata.Namespace` must be spelled `metadata.namespace`",
        ),
        ("apiVersion: v1\nkind: ConfigMap\nkind: ConfigMap\n", "found duplicate key"),  # not a case issue
    ],
)
def test_a_mis_cased_key_is_named(text: str, message: str) -> None:
    with raises_at("f.yaml:1" if "duplicate" not in message else "f.yaml:3:1", message):
        parse_documents(text, "f.yaml")


def test_non_kubernetes_file_in_a_directory_says_how_to_exclude_it(tmp_path: Path) -> None:
    write(tmp_path / "repo" / "apps" / "a.yaml", cm("a"))
    write(tmp_path / "repo" / "helm" / "values.yaml", "replicaCount: 2\n")
    with raises_at("repo/helm/values.yaml:1", "not a Kubernetes object") as hint:
        load_paths([tmp_path / "repo"], display_root=tmp_path)
    assert hint.message.endswith(
        "; if it is another tool's file, leave it out: add `helm/values.yaml` to `exclude` in "
        "repo/dra-gitops.yaml"
    )
    # Given on its own, the file has no repository root to exclude it from.
    with pytest.raises(NotAnObject) as info:
        load_paths([tmp_path / "repo" / "helm" / "values.yaml"], display_root=tmp_path)
    assert (
        str(info.value)
        == "repo/helm/values.yaml:1: not a Kubernetes object (no apiVersion, kind, metadata.name)"
    )


def test_non_kubernetes_blob_names_the_config_and_escapes_glob_characters() -> None:
    blobs = [("deploy/a.yaml", cm("a").encode()), ("deploy/x[1]*.yaml", b"- just\n- a list\n")]
    with raises_at("deploy/x[1]*.yaml:1", "document is a list, not a Kubernetes object (mapping)") as hint:
        load_blobs(blobs, root="deploy/", config="deploy/.dra-gitops.yaml")
    assert hint.message.endswith("add `x[[]1][*].yaml` to `exclude` in deploy/.dra-gitops.yaml")


# --- duplicates --------------------------------------------------------------------------------------


def with_data(text: str, **data: str) -> str:
    return text + "data:\n" + "".join(f"  {k}: {v!r}\n" for k, v in data.items())


def test_different_duplicate_in_one_file_names_both_locations_and_the_difference() -> None:
    text = with_data(cm("a"), k="1") + "---\n" + cm("b") + "---\n" + with_data(cm("a"), k="2")
    manifests = parse_documents(text, "f.yaml")
    with raises_at(
        "f.yaml:13",
        "ConfigMap/default/a is defined twice with different content",
        "(first at f.yaml:1): they differ at data.k",
    ):
        deduplicate(manifests)


def test_different_duplicate_across_blobs_names_both_files() -> None:
    with raises_at(
        "b.yaml:3", "ConfigMap/default/x is defined twice with different content", "first at a.yaml:1"
    ):
        load_blobs(
            [("a.yaml", cm("x").encode()), ("b.yaml", b"# c\n---\n" + with_data(cm("x"), k="v").encode())]
        )


def test_identical_duplicate_is_loaded_once_and_reported_with_both_places() -> None:
    # Same parsed content: comments, key order, quoting and flow style do not count.
    again = '# team b\n---\nmetadata: {namespace: "default", name: x}\nkind: ConfigMap\napiVersion: v1\n'
    result = load_blobs([("team-a/cm.yaml", cm("x", "default").encode()), ("team-b/cm.yaml", again.encode())])
    assert locations(result.manifests) == [("ConfigMap/default/x", "team-a/cm.yaml", 1)]
    (repeat,) = result.duplicates
    assert (repeat.where, repeat.first) == ("team-b/cm.yaml:3", "team-a/cm.yaml:1")
    assert repeat.message == (
        "ConfigMap/default/x is defined twice with the same content (first at team-a/cm.yaml:1); applied once"
    )


def test_identical_duplicate_in_one_file_and_a_third_copy() -> None:
    manifests = parse_documents(cm("a") + "---\n" + cm("b") + "---\n" + cm("a") + "---\n" + cm("a"), "f.yaml")
    kept, repeats = deduplicate(manifests)
    assert [m.where for m in kept] == ["f.yaml:1", "f.yaml:6"]
    assert [(r.where, r.first) for r in repeats] == [("f.yaml:11", "f.yaml:1"), ("f.yaml:16", "f.yaml:1")]


def test_list_order_is_content() -> None:
    one = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  finalizers: [a, b]\n"
    with raises_at("b.yaml:1", "they differ at metadata.finalizers[0]"):
        load_blobs([("a.yaml", one.encode()), ("b.yaml", one.replace("[a, b]", "[b, a]").encode())])


def test_implicit_default_namespace_duplicates_explicit_one() -> None:
    with pytest.raises(ManifestError, match="defined twice"):
        load_blobs([("a.yaml", cm("x").encode()), ("b.yaml", cm("x", "default").encode())])


def test_same_name_in_other_namespace_or_kind_or_group_is_not_a_duplicate() -> None:
    other_kind = "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n"
    other_group = "apiVersion: example.com/v1\nkind: ConfigMap\nmetadata: {name: x}\n"
    result = load_blobs(
        [("a.yaml", cm("x").encode()), ("b.yaml", (cm("x", "other") + "---\n" + other_kind).encode())]
        + [("c.yaml", other_group.encode())]
    )
    assert len(result.manifests) == 4


def test_same_object_in_two_api_versions_is_a_duplicate() -> None:
    v1 = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: g}\n"
    beta = "apiVersion: resource.k8s.io/v1beta1\nkind: DeviceClass\nmetadata: {name: g}\n"
    with pytest.raises(ManifestError, match="DeviceClass/g is defined twice"):
        load_blobs([("a.yaml", v1.encode()), ("b.yaml", beta.encode())])


# --- load_blobs --------------------------------------------------------------------------------------


def test_load_blobs_keeps_order_paths_and_lines() -> None:
    result = load_blobs(
        [
            ("deploy/b.yaml", (cm("one") + "---\n" + cm("two")).encode()),
            (
                "deploy/a.json",
                json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}).encode(),
            ),
            ("empty.yaml", b""),
        ]
    )
    assert result.files == ["deploy/b.yaml", "deploy/a.json", "empty.yaml"]
    assert locations(result.manifests) == [
        ("ConfigMap/default/one", "deploy/b.yaml", 1),
        ("ConfigMap/default/two", "deploy/b.yaml", 6),
        ("Secret/default/s", "deploy/a.json", 1),
    ]


def test_load_blobs_applies_limits() -> None:
    with raises_at("big.yaml:1", "over the 10-byte limit"):
        load_blobs([("big.yaml", cm("x").encode())], Limits(max_file_bytes=10))


def test_load_blobs_error_names_the_blob() -> None:
    with raises_at("x/broken.yaml:2:5", "invalid YAML"):
        load_blobs([("ok.yaml", cm("a").encode()), ("x/broken.yaml", b"a: 1\nb: c: d\n")])


def test_load_blobs_empty() -> None:
    result = load_blobs([])
    assert result.manifests == [] and result.files == []


# --- load_paths: files and directories ---------------------------------------------------------------


def test_is_manifest_file() -> None:
    assert is_manifest_file("a.yaml") and is_manifest_file("a.yml") and is_manifest_file("a.json")
    assert not is_manifest_file("a.txt") and not is_manifest_file("README.md")
    assert not is_manifest_file("dra-gitops.yaml") and not is_manifest_file(".dra-gitops.yaml")
    assert not is_manifest_file("yaml")


def test_load_single_file_path_relative_to_display_root(tmp_path: Path) -> None:
    f = write(tmp_path / "sub" / "one.yaml", "# c\n" + cm("a"))
    result = load_paths([f], display_root=tmp_path)
    assert result.files == ["sub/one.yaml"]
    assert locations(result.manifests) == [("ConfigMap/default/a", "sub/one.yaml", 2)]


def test_paths_default_to_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "repo" / "a.yaml", cm("a"))
    monkeypatch.chdir(tmp_path)
    result = load_paths([Path("repo")])
    assert result.files == ["repo/a.yaml"]
    assert result.manifests[0].where == "repo/a.yaml:1"


def test_file_outside_display_root_keeps_given_path(tmp_path: Path) -> None:
    f = write(tmp_path / "a" / "x.yaml", cm("x"))
    other = tmp_path / "b"
    other.mkdir()
    result = load_paths([f], display_root=other)
    assert result.files == [f.as_posix()]


def test_directory_walk_order_is_stable_and_by_name(tmp_path: Path) -> None:
    for rel in ["z.yaml", "m.yml", "01-first.yaml", "a/y.yaml", "a/b.json", "b/c/d.yaml", "b/a.yaml"]:
        if rel.endswith(".json"):
            write(
                tmp_path / rel,
                json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": rel}}),
            )
        else:
            write(tmp_path / rel, cm(rel.replace("/", "-").replace(".", "-")))
    result = load_paths([tmp_path], display_root=tmp_path)
    # Lexical depth-first order, as `find | sort` and `kubectl apply -R` walk: numbered files go first.
    assert result.files == sorted(result.files)
    assert result.files == [
        "01-first.yaml",
        "a/b.json",
        "a/y.yaml",
        "b/a.yaml",
        "b/c/d.yaml",
        "m.yml",
        "z.yaml",
    ]
    assert [m.path for m in result.manifests] == result.files
    again = load_paths([tmp_path], display_root=tmp_path)
    assert again.files == result.files


def test_files_of_one_directory_load_in_name_order(tmp_path: Path) -> None:
    write(tmp_path / "01-namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: gpu}\n")
    write(tmp_path / "02-config.yaml", cm("cfg", "gpu"))
    write(tmp_path / "03-config.yaml", cm("cfg2", "gpu"))
    result = load_paths([tmp_path], display_root=tmp_path)
    assert result.files == ["01-namespace.yaml", "02-config.yaml", "03-config.yaml"]


def test_walk_skips_hidden_entries_repo_config_and_other_files(tmp_path: Path) -> None:
    write(tmp_path / "keep.yaml", cm("keep"))
    write(tmp_path / ".git" / "config.yaml", cm("git"))
    write(tmp_path / ".github" / "workflows" / "ci.yml", "on: push\n")
    write(tmp_path / "sub" / ".hidden" / "x.yaml", cm("hidden"))
    write(tmp_path / ".hidden.yaml", cm("hidden-file"))
    write(tmp_path / "dra-gitops.yaml", "paths: [x]\n")
    write(tmp_path / "sub" / "dra-gitops.yaml", "paths: [x]\n")
    write(tmp_path / "README.md", "# hi\n")
    write(tmp_path / "notes.txt", "a: b: c\n")
    write(tmp_path / "sub" / "kept.yml", cm("kept"))
    result = load_paths([tmp_path], display_root=tmp_path)
    assert result.files == ["keep.yaml", "sub/kept.yml"]
    assert [m.ref.name for m in result.manifests] == ["keep", "kept"]


def test_explicit_file_is_loaded_whatever_its_name(tmp_path: Path) -> None:
    f = write(tmp_path / "manifests.txt", cm("x"))
    assert [m.ref.name for m in load_paths([f], display_root=tmp_path).manifests] == ["x"]


def test_several_paths_are_loaded_in_the_given_order(tmp_path: Path) -> None:
    write(tmp_path / "b" / "x.yaml", cm("bx"))
    write(tmp_path / "a" / "x.yaml", cm("ax"))
    result = load_paths([tmp_path / "b", tmp_path / "a"], display_root=tmp_path)
    assert result.files == ["b/x.yaml", "a/x.yaml"]


def test_different_duplicate_across_files_names_both_locations(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", cm("dup"))
    write(tmp_path / "b.yaml", "# comment\n" + with_data(cm("dup"), k="v"))
    with pytest.raises(ManifestError) as info:
        load_paths([tmp_path], display_root=tmp_path)
    # Which file counts as first is the walk order's business (tested above); both places are named.
    message = str(info.value)
    assert "ConfigMap/default/dup is defined twice with different content" in message
    assert (message.startswith("b.yaml:2: ") and "(first at a.yaml:1)" in message) or (
        message.startswith("a.yaml:1: ") and "(first at b.yaml:2)" in message
    ), message


def test_identical_duplicate_across_files_is_loaded_once(tmp_path: Path) -> None:
    write(tmp_path / "team-a" / "ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shared-ns\n")
    write(
        tmp_path / "team-b" / "ns.yaml",
        "# ours too\napiVersion: v1\nkind: Namespace\nmetadata: {name: shared-ns}\n",
    )
    result = load_paths([tmp_path], display_root=tmp_path)
    assert locations(result.manifests) == [("Namespace/shared-ns", "team-a/ns.yaml", 1)]
    assert [(d.where, d.first) for d in result.duplicates] == [("team-b/ns.yaml:2", "team-a/ns.yaml:1")]


def test_a_file_reached_through_two_given_paths_is_read_once(tmp_path: Path) -> None:
    write(tmp_path / "apps" / "a.yaml", cm("a"))
    result = load_paths([tmp_path, tmp_path / "apps", tmp_path / "apps" / "a.yaml"], display_root=tmp_path)
    assert result.files == ["apps/a.yaml"]
    assert locations(result.manifests) == [("ConfigMap/default/a", "apps/a.yaml", 1)]
    assert result.duplicates == []


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ManifestError, match="no such file or directory") as info:
        load_paths([missing], display_root=tmp_path)
    assert str(info.value).startswith(str(missing))


def test_error_in_a_file_names_it_relative_to_display_root(tmp_path: Path) -> None:
    write(tmp_path / "ok.yaml", cm("ok"))
    write(tmp_path / "sub" / "bad.yaml", cm("fine") + "---\n- not\n- an object\n")
    with raises_at("sub/bad.yaml:6", "document is a list"):
        load_paths([tmp_path], display_root=tmp_path)


def test_empty_directory(tmp_path: Path) -> None:
    result = load_paths([tmp_path], display_root=tmp_path)
    assert result.files == [] and result.manifests == []


def test_file_over_limit_is_refused_without_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    subprocess.run(["truncate", "-s", "50M", str(big)], check=True)
    assert big.stat().st_size == 50 * 1024 * 1024
    start = time.perf_counter()
    with raises_at("big.yaml:1", f"file is {50 * 1024 * 1024} bytes", "16777216-byte limit"):
        load_paths([tmp_path], display_root=tmp_path)
    assert time.perf_counter() - start < 1.0
    # The sparse file still occupies (next to) no disk: nothing was written by reading it either.
    assert big.stat().st_blocks * 512 < 1024 * 1024


def test_file_limit_is_configurable(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", cm("a"))
    with raises_at("a.yaml:1", "over the 10-byte limit"):
        load_paths([tmp_path], Limits(max_file_bytes=10), display_root=tmp_path)


def test_too_many_files_is_refused(tmp_path: Path) -> None:
    for i in range(3):
        write(tmp_path / f"{i}.yaml", cm(f"c{i}"))
    assert len(load_paths([tmp_path], Limits(max_files=3), display_root=tmp_path).manifests) == 3
    with pytest.raises(ManifestError, match="more than 2 manifest files"):
        load_paths([tmp_path], Limits(max_files=2), display_root=tmp_path)


# --- symlinks ----------------------------------------------------------------------------------------


def test_symlink_to_file_outside_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    secret = write(tmp_path / "outside" / "secret.yaml", cm("stolen"))
    write(root / "a.yaml", cm("a"))
    (root / "link.yaml").symlink_to(secret)
    with raises_at("link.yaml", "symlink points outside the repository"):
        load_paths([root], display_root=root)


def test_symlink_to_directory_outside_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(tmp_path / "outside" / "x.yaml", cm("x"))
    root.mkdir()
    (root / "etc").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(ManifestError, match="symlink points outside the repository"):
        load_paths([root], display_root=root)


def test_relative_symlink_escaping_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(tmp_path / "outside.yaml", cm("x"))
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "up.yaml").symlink_to(Path("..") / ".." / "outside.yaml")
    with pytest.raises(ManifestError, match="outside the repository"):
        load_paths([root], display_root=root)


def test_symlink_inside_root_is_allowed(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root / ".shared" / "common.yaml", cm("common"))
    (root / "common.yaml").symlink_to(Path(".shared") / "common.yaml")
    write(root / "data" / "raw.txt", cm("raw"))
    (root / "raw.yaml").symlink_to(root / "data" / "raw.txt")
    result = load_paths([root], display_root=root)
    assert sorted(result.files) == ["common.yaml", "raw.yaml"]
    assert sorted((m.ref.name, m.where) for m in result.manifests) == [
        ("common", "common.yaml:1"),
        ("raw", "raw.yaml:1"),
    ]


def test_symlinked_directory_inside_root_is_not_loaded_twice(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root / "real" / "a.yaml", cm("a"))
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    result = load_paths([root], display_root=root)
    assert [m.ref.name for m in result.manifests] == ["a"]


def test_directory_symlink_loop_does_not_hang(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root / "sub" / "a.yaml", cm("a"))
    (root / "sub" / "loop").symlink_to(Path(".."), target_is_directory=True)
    (root / "sub" / "self").symlink_to(Path("."), target_is_directory=True)
    start = time.perf_counter()
    result = load_paths([root], display_root=root)
    assert time.perf_counter() - start < 5.0
    assert [m.ref.name for m in result.manifests] == ["a"]


def test_self_referencing_symlink_is_a_manifest_error(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root / "a.yaml", cm("a"))
    (root / "loop.yaml").symlink_to("loop.yaml")
    with pytest.raises(ManifestError) as info:
        load_paths([root], display_root=root)
    assert "loop.yaml" in str(info.value)


def test_dangling_symlink_inside_root_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root / "a.yaml", cm("a"))
    (root / "gone.yaml").symlink_to(root / "missing.yaml")
    # A dangling link is neither a file nor a directory: nothing to load from it.
    result = load_paths([root], display_root=root)
    assert result.files == ["a.yaml"]


def test_display_root_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write(real / "a.yaml", cm("a"))
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    result = load_paths([link], display_root=link)
    assert result.files == ["a.yaml"]


# --- load_repo_config --------------------------------------------------------------------------------


def test_repo_config_full() -> None:
    text = "paths: [deploy, drivers]\nexclude: ['**/test/*']\nparams:\n  capacity_deny: true\n"
    assert load_repo_config(text, "dra-gitops.yaml") == {
        "paths": ["deploy", "drivers"],
        "exclude": ["**/test/*"],
        "params": {"capacity_deny": True},
    }


@pytest.mark.parametrize("text", ["", "# nothing\n", "---\n", b""])
def test_repo_config_empty_is_empty_dict(text: str | bytes) -> None:
    assert load_repo_config(text, "dra-gitops.yaml") == {}


def test_repo_config_bytes_and_an_unknown_key_is_refused_with_the_closest_known() -> None:
    assert load_repo_config(b"paths: [a]\n", "c.yaml") == {"paths": ["a"]}
    with raises_at("c.yaml:2", "unknown key `path`; did you mean `paths`?"):
        load_repo_config(b"params: {}\npath: [a]\n", "c.yaml")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- a\n- b\n", "must be a mapping"),
        ("just text\n", "must be a mapping"),
        ("paths: deploy\n", "`paths` must be a list of strings"),
        ("paths: [1, 2]\n", "`paths` must be a list of strings"),
        ("exclude: {a: b}\n", "`exclude` must be a list of strings"),
        ("exclude: [a, [b]]\n", "`exclude` must be a list of strings"),
        ("params: [a]\n", "`params` must be a mapping"),
        ("params: x\n", "`params` must be a mapping"),
    ],
)
def test_repo_config_validation(text: str, fragment: str) -> None:
    with raises_at("cfg/dra-gitops.yaml:1", fragment):
        load_repo_config(text, "cfg/dra-gitops.yaml")


def test_repo_config_invalid_yaml_names_the_line() -> None:
    with pytest.raises(ManifestError) as info:
        load_repo_config("paths: [a]\nparams: {a: [\n", "dra-gitops.yaml")
    assert str(info.value).startswith("dra-gitops.yaml:")
    assert "invalid repository config" in str(info.value)
    assert info.value.where is not None and info.value.where.split(":")[1].isdigit()


def test_repo_config_multi_document_is_refused() -> None:
    with pytest.raises(ManifestError):
        load_repo_config("paths: [a]\n---\nparams: {}\n", "dra-gitops.yaml")


def test_repo_config_timestamps_are_strings() -> None:
    assert load_repo_config("params: {since: 2024-05-01}\n", "c.yaml") == {"params": {"since": "2024-05-01"}}


def test_duplicate_keys_are_refused_like_kubectl_does() -> None:
    with raises_at("d.yaml:5:3", "duplicate key 'name'"):
        parse_documents("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n", "d.yaml")


def test_merge_keys_may_be_overridden() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  <<: {x: '1', z: '3'}\n  x: '2'\n"
    assert parse_documents(text, "m.yaml")[0].body["data"] == {"x": "2", "z": "3"}


# --- the direct constructor gives what PyYAML's safe constructor gives -------------------------------

SCALARS_AND_TAGS = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: scalars
  labels: {"quoted key": 'x', plain: y}
data:
  ints: [0, 7, 10, 010, 0x1f, 0b11, +3, -4, 1_000, 190:20:30, "12"]
  floats: [1.5, .inf, -.Inf, .nan, 1e3, 6.8523015e+5]
  bools: [true, False, yes, No, on, OFF]
  nulls: [~, null, Null]
  empty:
  strings: [2024-01-01, "0", '1.0', =x, !!str 12, !!int "13", !!float "2"]
  binary: !!binary aGVsbG8=
  set: !!set {a, b}
  pairs: !!pairs [a: 1, b: 2]
  omap: !!omap [c: 1, d: 2]
  1: int key
  false: bool key
  null: null key
  1.5: float key
  nested: [[a, [b, {c: [d]}]], {}, []]
  "=": equals key
"""


def _construct_all(text: str, fast: bool) -> list[Any]:
    """Every document, built by the direct constructor or by PyYAML's safe one (with our resolvers)."""
    from reconciler.model.yamldocs import _Loader

    loader = _Loader(text)
    documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            documents.append(loader.construct_tree(node) if fast else loader.construct_document(node))
    finally:
        loader.dispose()
    return documents


def _base_construct(text: str) -> list[Any]:
    return _construct_all(text, fast=False)


def _fast_construct(text: str) -> list[Any]:
    return _construct_all(text, fast=True)


@pytest.mark.parametrize(
    "text",
    [
        SCALARS_AND_TAGS,
        MULTI,
        "a: 1\n---\n- x\n- {y: [1, 2]}\n---\n",
        '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}, "data": {"n": 12}}',
        "<<: {x: '1'}\nx: '2'\ny: {<<: [{a: b}, {c: d}]}\n",
    ],
)
def test_direct_constructor_matches_the_safe_constructor(text: str) -> None:
    fast, base = _fast_construct(text), _base_construct(text)
    assert fast == base
    assert repr(fast) == repr(base)  # same types too: 1 is not True, 1.0 is not 1


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a: 1\na: 2\n", "found duplicate key 'a'"),
        ("a: {b: 1, b: 1}\n", "found duplicate key 'b'"),
        ("1: x\n1: y\n", "found duplicate key 1"),
        ("[a]: 1\n", "found unhashable key"),
        ("a: !!str [x]\n", "expected a scalar node"),
        ("a: !!map [x]\n", "expected a mapping node"),
        ("a: !unknown x\n", "could not determine a constructor"),
        ("a: =\n", "could not determine a constructor"),
        ("a: [<<]\n", "could not determine a constructor"),
    ],
)
def test_direct_constructor_refuses_what_the_safe_constructor_refuses(text: str, fragment: str) -> None:
    with pytest.raises(yaml.constructor.ConstructorError) as fast:
        _fast_construct(text)
    with pytest.raises(yaml.constructor.ConstructorError) as base:
        _base_construct(text)
    assert fragment in str(fast.value)
    assert str(fast.value) == str(base.value)


def test_compact_nesting_after_ordinary_list_items_is_still_found() -> None:
    text = "- a\n- - b\n" + "x: " + "- " * 60 + "z\n"
    with raises_at("n.yaml:3", "nested 50 or more levels"):
        parse_documents(text, "n.yaml")
