package dra.claim_refs_test

import data.dra.claim_refs

# --- builders ---------------------------------------------------------------------------------

# A Deployment in namespace ml whose pod template declares `pod_claims` and whose containers use
# `container_claims`; templates/claims are the "ns/name" keys the pod references.
workload(pod_claims, container_claims) := {
	"apiVersion": "apps/v1",
	"kind": "Deployment",
	"metadata": {"name": "trainer", "namespace": "ml"},
	"_dra": {
		"ref": "Deployment/ml/trainer",
		"group": "apps",
		"version": "v1",
		"kind": "Deployment",
		"namespace": "ml",
		"name": "trainer",
		"path": "workloads/trainer.yaml",
		"line": 3,
		"stage": 4,
		"role": "workload",
		"device_classes": [],
		"claim_templates": [concat("/", ["ml", pc.template]) | some pc in pod_claims; pc.template != null],
		"claims": [concat("/", ["ml", pc.claim]) | some pc in pod_claims; pc.claim != null],
		"pod_claims": pod_claims,
		"container_claims": container_claims,
		"driver": null,
		"canary_for": null,
		"driver_template": null,
		"admin_access": false,
	},
}

from_template(name, template) := {"name": name, "claim": null, "template": template}

from_claim(name, claim) := {"name": name, "claim": claim, "template": null}

uses(container, name) := {"container": container, "name": name, "request": null}

index(templates, claims) := {
	"device_classes": {},
	"claim_templates": {key: concat("/", ["ResourceClaimTemplate", key]) | some key in templates},
	"claims": {key: concat("/", ["ResourceClaim", key]) | some key in claims},
	"namespaces": {},
	"drivers": {},
	"canaries": {},
}

doc(objects, idx, cluster) := {
	"objects": objects,
	"base_objects": [],
	"changes": [],
	"cluster": cluster,
	"index": idx,
	"base_index": index([], []),
	"params": {},
}

live(templates, claims) := {
	"version": "v1.34.1",
	"served": {"resource.k8s.io": ["v1"]},
	"deprecated": {"resource.k8s.io": []},
	"objects": [],
	"index": index(templates, claims),
}

denials(objects, idx) := result if {
	result := claim_refs.deny with input as doc(objects, idx, null)
}

warnings(objects, idx) := result if {
	result := claim_refs.warn with input as doc(objects, idx, null)
}

good := workload([from_template("gpu", "one-gpu")], [uses("main", "gpu")])

# --- allowed ------------------------------------------------------------------------------------

test_consistent_template_workload_allowed if {
	count(denials([good], index(["ml/one-gpu"], []))) == 0
	count(warnings([good], index(["ml/one-gpu"], []))) == 0
}

test_consistent_named_claim_allowed if {
	w := workload([from_claim("gpu", "shared")], [uses("main", "gpu"), uses("sidecar", "gpu")])
	count(denials([w], index([], ["ml/shared"]))) == 0
}

test_container_request_not_checked if {
	w := workload([from_claim("gpu", "shared")], [{"container": "main", "name": "gpu", "request": "nope"}])
	count(denials([w], index([], ["ml/shared"]))) == 0
}

test_template_in_cluster_allowed if {
	result := claim_refs.deny with input as doc([good], index([], []), live(["ml/one-gpu"], []))
	count(result) == 0
}

test_claim_in_cluster_allowed if {
	w := workload([from_claim("gpu", "shared")], [uses("main", "gpu")])
	result := claim_refs.deny with input as doc([w], index([], []), live([], ["ml/shared"]))
	count(result) == 0
}

test_objects_without_claims_ignored if {
	w := workload([], [])
	count(denials([w], index([], []))) == 0
	count(warnings([w], index([], []))) == 0
}

# --- container claim without pod entry ----------------------------------------------------------

test_container_claim_without_pod_entry_denied if {
	w := workload([from_template("gpu", "one-gpu")], [uses("main", "gpu"), uses("main", "accel")])
	result := denials([w], index(["ml/one-gpu"], []))
	count(result) == 1
	some v in result
	v == {
		"rule": "claim-refs",
		"msg": "Deployment/ml/trainer: container main uses claim accel, but spec.resourceClaims has no entry with that name",
		"ref": "Deployment/ml/trainer",
		"path": "workloads/trainer.yaml",
		"line": 3,
	}
}

# --- pod entry no container uses ------------------------------------------------------------------

test_unused_pod_claim_warns if {
	w := workload([from_template("gpu", "one-gpu"), from_template("spare", "one-gpu")], [uses("main", "gpu")])
	count(denials([w], index(["ml/one-gpu"], []))) == 0
	result := warnings([w], index(["ml/one-gpu"], []))
	count(result) == 1
	some v in result
	contains(v.msg, "pod claim spare is used by no container")
}

# --- exactly one of claim / template --------------------------------------------------------------

test_both_claim_and_template_denied if {
	w := workload([{"name": "gpu", "claim": "shared", "template": "one-gpu"}], [uses("main", "gpu")])
	result := denials([w], index(["ml/one-gpu"], ["ml/shared"]))
	count(result) == 1
	some v in result
	contains(v.msg, "sets both")
}

test_neither_claim_nor_template_denied if {
	w := workload([{"name": "gpu", "claim": null, "template": null}], [uses("main", "gpu")])
	result := denials([w], index([], []))
	count(result) == 1
	some v in result
	contains(v.msg, "sets neither")
}

test_empty_strings_count_as_unset if {
	w := workload([{"name": "gpu", "claim": "", "template": ""}], [uses("main", "gpu")])
	some v in denials([w], index([], []))
	contains(v.msg, "sets neither")
}

test_missing_keys_count_as_unset if {
	w := workload([{"name": "gpu"}], [uses("main", "gpu")])
	count(denials([w], index([], []))) == 1
}

# --- references resolve ---------------------------------------------------------------------------

test_missing_template_denied if {
	result := denials([good], index([], []))
	count(result) == 1
	some v in result
	contains(v.msg, "ResourceClaimTemplate ml/one-gpu")
}

test_template_in_other_namespace_denied if {
	count(denials([good], index(["other/one-gpu"], []))) == 1
}

test_missing_claim_denied if {
	w := workload([from_claim("gpu", "shared")], [uses("main", "gpu")])
	result := denials([w], index([], []))
	count(result) == 1
	some v in result
	contains(v.msg, "ResourceClaim ml/shared")
}

test_missing_in_change_and_cluster_denied if {
	result := claim_refs.deny with input as doc([good], index([], []), live(["ml/other"], []))
	count(result) == 1
}
