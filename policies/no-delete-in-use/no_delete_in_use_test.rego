package dra.no_delete_in_use_test

import data.dra.no_delete_in_use

# --- builders ---------------------------------------------------------------------------------

obj(kind, ns, name, role, extra) := {
	"apiVersion": "resource.k8s.io/v1",
	"kind": kind,
	"metadata": {"name": name},
	"_dra": object.union(
		{
			"ref": ref(kind, ns, name),
			"group": "resource.k8s.io",
			"version": "v1",
			"kind": kind,
			"namespace": ns,
			"name": name,
			"path": "base/file.yaml",
			"line": 2,
			"stage": 3,
			"role": role,
			"device_classes": [],
			"claim_templates": [],
			"claims": [],
		},
		extra,
	),
}

ref(kind, "", name) := concat("/", [kind, name])

ref(kind, ns, name) := concat("/", [kind, ns, name]) if ns != ""

device_class(name) := obj("DeviceClass", "", name, "device-class", {})

resource_class(name) := obj("ResourceClass", "", name, "device-class", {"version": "v1alpha2"})

template(name, class) := obj("ResourceClaimTemplate", "ml", name, "claim-template", {"device_classes": [class]})

claim(name, class) := obj("ResourceClaim", "ml", name, "claim", {"device_classes": [class]})

pod(name, templates, claims) := obj("Pod", "ml", name, "workload", {"claim_templates": templates, "claims": claims})

deployment(name, templates) := obj("Deployment", "ml", name, "workload", {"claim_templates": templates})

delete(old) := {"op": "delete", "ref": old._dra.ref, "stage": old._dra.stage, "old": old, "new": null, "driver_change": false}

doc(objects, changes, cluster_objects) := {
	"objects": objects,
	"base_objects": [],
	"changes": changes,
	"cluster": cluster_of(cluster_objects),
	"index": {},
	"base_index": {},
	"params": {},
}

cluster_of(null) := null

cluster_of(objects) := {
	"version": "v1.34.0",
	"served": {"resource.k8s.io": ["v1"]},
	"deprecated": {"resource.k8s.io": []},
	"objects": objects,
	"index": {},
} if objects != null

denials(objects, changes, cluster_objects) := result if {
	result := no_delete_in_use.deny with input as doc(objects, changes, cluster_objects)
}

# --- classes ----------------------------------------------------------------------------------------

test_delete_unused_class_allowed if {
	count(denials([template("one-gpu", "gpu.example.com")], [delete(device_class("old.example.com"))], null)) == 0
}

test_delete_class_used_by_template_denied if {
	result := denials([template("one-gpu", "gpu.example.com")], [delete(device_class("gpu.example.com"))], null)
	result == {{
		"rule": "no-delete-in-use",
		"msg": "DeviceClass/gpu.example.com is deleted but still used by ResourceClaimTemplate/ml/one-gpu; remove or change the users first (or in this change)",
		"ref": "DeviceClass/gpu.example.com",
		"path": "base/file.yaml",
		"line": 2,
	}}
}

test_delete_class_used_by_claim_denied if {
	count(denials([claim("shared", "gpu.example.com")], [delete(device_class("gpu.example.com"))], null)) == 1
}

test_delete_v1alpha2_resource_class_denied if {
	count(denials([template("one-gpu", "gpu.example.com")], [delete(resource_class("gpu.example.com"))], null)) == 1
}

test_delete_class_with_its_users_allowed if {
	# the template goes away in the same change
	changes := [delete(device_class("gpu.example.com")), delete(template("one-gpu", "gpu.example.com"))]
	count(denials([], changes, null)) == 0
}

test_delete_class_used_by_live_generated_claim_denied if {
	generated := claim("trainer-abc-gpu-x7k2p", "gpu.example.com")
	result := denials([], [delete(device_class("gpu.example.com"))], [device_class("gpu.example.com"), generated])
	count(result) == 1
	some v in result
	contains(v.msg, "ResourceClaim/ml/trainer-abc-gpu-x7k2p")
}

test_live_users_deleted_in_same_change_ignored if {
	t := template("one-gpu", "gpu.example.com")
	changes := [delete(device_class("gpu.example.com")), delete(t)]
	count(denials([], changes, [device_class("gpu.example.com"), t])) == 0
}

test_live_users_changed_by_head_ignored if {
	# the head version of the template no longer uses the class; the live one will be updated first
	changes := [delete(device_class("gpu.example.com"))]
	count(denials([template("one-gpu", "new.example.com")], changes, [template("one-gpu", "gpu.example.com")])) == 0
}

test_many_users_listed_briefly if {
	objects := [template(sprintf("t%d", [i]), "gpu.example.com") | some i in numbers.range(1, 7)]
	result := denials(objects, [delete(device_class("gpu.example.com"))], null)
	count(result) == 1
	some v in result
	contains(v.msg, "and 2 more")
}

# --- templates and claims -----------------------------------------------------------------------

test_delete_template_used_by_workload_denied if {
	result := denials([deployment("trainer", ["ml/one-gpu"])], [delete(template("one-gpu", "gpu.example.com"))], null)
	count(result) == 1
	some v in result
	contains(v.msg, "ResourceClaimTemplate/ml/one-gpu is deleted but still used by Deployment/ml/trainer")
}

test_delete_unused_template_allowed if {
	count(denials([deployment("trainer", ["ml/other"])], [delete(template("one-gpu", "gpu.example.com"))], null)) == 0
}

test_delete_template_same_name_other_namespace_allowed if {
	other := obj("Deployment", "team-b", "trainer", "workload", {"claim_templates": ["team-b/one-gpu"]})
	count(denials([other], [delete(template("one-gpu", "gpu.example.com"))], null)) == 0
}

test_delete_claim_used_by_pod_denied if {
	count(denials([pod("worker", [], ["ml/shared"])], [delete(claim("shared", "gpu.example.com"))], null)) == 1
}

test_delete_claim_used_by_live_pod_denied if {
	live_pod := pod("worker-7f9c", [], ["ml/shared"])
	result := denials([], [delete(claim("shared", "gpu.example.com"))], [live_pod])
	count(result) == 1
	some v in result
	contains(v.msg, "Pod/ml/worker-7f9c")
}

test_delete_template_used_by_live_pod_denied if {
	live_pod := pod("trainer-5d8b-x", ["ml/one-gpu"], [])
	count(denials([], [delete(template("one-gpu", "gpu.example.com"))], [live_pod])) == 1
}

test_delete_claim_offline_ignores_nothing_live if {
	count(denials([], [delete(claim("shared", "gpu.example.com"))], null)) == 0
}

test_delete_other_kinds_ignored if {
	ns := obj("Namespace", "", "ml", "namespace", {})
	count(denials([pod("worker", [], ["ml/shared"])], [delete(ns)], null)) == 0
}

# A deleted Deployment's pods go with it (the input marks them `removed_with`): they keep nothing in use.
test_pods_removed_with_their_deleted_owner_are_no_users if {
	tmpl := template("single-gpu", "gpu.example.com")
	owner := deployment("trainer", ["ml/single-gpu"])
	gone := object.union(pod("trainer-abc-1", ["ml/single-gpu"], []), {"_dra": {"removed_with": "Deployment/ml/trainer"}})
	count(no_delete_in_use.deny) == 0 with input as doc([], [delete(tmpl), delete(owner)], [tmpl, owner, gone])
}

test_a_pod_whose_owner_stays_is_still_a_user if {
	tmpl := template("single-gpu", "gpu.example.com")
	stays := pod("trainer-abc-1", ["ml/single-gpu"], [])
	count(no_delete_in_use.deny) == 1 with input as doc([], [delete(tmpl)], [tmpl, stays])
}
