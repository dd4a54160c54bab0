package dra.class_before_template_test

import data.dra.class_before_template

# --- builders ---------------------------------------------------------------------------------

meta(kind, ns, name, role, version, stage, extra) := object.union(
	{
		"ref": ref(kind, ns, name),
		"group": "resource.k8s.io",
		"version": version,
		"kind": kind,
		"namespace": ns,
		"name": name,
		"path": "manifests/x.yaml",
		"line": 7,
		"stage": stage,
		"role": role,
		"device_classes": [],
		"claim_templates": [],
		"claims": [],
		"pod_claims": [],
		"container_claims": [],
		"driver": null,
		"canary_for": null,
		"driver_template": null,
		"admin_access": false,
	},
	extra,
)

ref(kind, "", name) := concat("/", [kind, name])

ref(kind, ns, name) := concat("/", [kind, ns, name]) if ns != ""

# A ResourceClaimTemplate in namespace ml requesting `classes`, written in resource.k8s.io/`version`.
template(version, classes, stage) := {
	"apiVersion": concat("/", ["resource.k8s.io", version]),
	"kind": "ResourceClaimTemplate",
	"metadata": {"name": "one-gpu", "namespace": "ml"},
	"_dra": meta("ResourceClaimTemplate", "ml", "one-gpu", "claim-template", version, stage, {"device_classes": classes}),
}

claim(version, classes) := {
	"apiVersion": concat("/", ["resource.k8s.io", version]),
	"kind": "ResourceClaim",
	"metadata": {"name": "shared", "namespace": "ml"},
	"_dra": meta("ResourceClaim", "ml", "shared", "claim", version, 3, {"device_classes": classes}),
}

# DeviceClass, or ResourceClass for v1alpha1/v1alpha2.
class(version, name, stage) := {
	"apiVersion": concat("/", ["resource.k8s.io", version]),
	"kind": kind,
	"metadata": {"name": name},
	"_dra": meta(kind, "", name, "device-class", version, stage, {}),
} if {
	kind := class_kind(version)
}

class_kind(version) := "ResourceClass" if {
	version in {"v1alpha1", "v1alpha2"}
} else := "DeviceClass"

index(objects) := {
	"device_classes": {o._dra.name: o._dra.ref | some o in objects; o._dra.role == "device-class"},
	"claim_templates": {},
	"claims": {},
	"namespaces": {},
	"drivers": {},
	"canaries": {},
}

doc(objects, base_objects, cluster) := {
	"revision": {"sha": "head", "parent": null, "message": null, "author": null, "signed": false},
	"base": null,
	"objects": objects,
	"base_objects": base_objects,
	"changes": [],
	"cluster": cluster,
	"index": index(objects),
	"base_index": index(base_objects),
	"params": {},
}

live(objects) := {
	"version": "v1.34.1",
	"served": {"resource.k8s.io": ["v1"]},
	"deprecated": {"resource.k8s.io": []},
	"objects": objects,
	"index": index(objects),
}

versions := ["v1alpha2", "v1alpha3", "v1beta1", "v1beta2", "v1"]

deny_for(objects) := denials if {
	denials := class_before_template.deny with input as doc(objects, [], null)
}

# --- class in the same change ----------------------------------------------------------------

test_class_in_change_allowed_every_version if {
	every version in versions {
		count(deny_for([class(version, "gpu.example.com", 2), template(version, ["gpu.example.com"], 3)])) == 0
	}
}

test_class_after_template_in_file_order_allowed if {
	# the file order does not matter, only the stage does
	count(deny_for([template("v1", ["gpu.example.com"], 3), class("v1", "gpu.example.com", 2)])) == 0
}

test_same_stage_allowed if {
	count(deny_for([class("v1", "gpu.example.com", 3), template("v1", ["gpu.example.com"], 3)])) == 0
}

# --- missing class, per version ---------------------------------------------------------------

missing_denied(version, kind_word) if {
	denials := deny_for([template(version, ["gpu.example.com"], 3)])
	count(denials) == 1
	some v in denials
	v.rule == "class-before-template"
	v.ref == "ResourceClaimTemplate/ml/one-gpu"
	v.path == "manifests/x.yaml"
	v.line == 7
	contains(v.msg, concat(" ", [kind_word, "gpu.example.com"]))
}

test_missing_class_denied_v1alpha2 if missing_denied("v1alpha2", "ResourceClass")

test_missing_class_denied_v1alpha3 if missing_denied("v1alpha3", "DeviceClass")

test_missing_class_denied_v1beta1 if missing_denied("v1beta1", "DeviceClass")

test_missing_class_denied_v1beta2 if missing_denied("v1beta2", "DeviceClass")

test_missing_class_denied_v1 if missing_denied("v1", "DeviceClass")

test_missing_class_for_claim_denied if {
	count(deny_for([claim("v1", ["gpu.example.com"])])) == 1
}

test_every_alternative_checked if {
	# firstAvailable: one alternative exists, the other does not -> one denial naming the missing one
	denials := deny_for([class("v1", "gpu.example.com", 2), claim("v1", ["big-gpu.example.com", "gpu.example.com"])])
	count(denials) == 1
	some v in denials
	contains(v.msg, "big-gpu.example.com")
}

test_other_class_name_denied if {
	count(deny_for([class("v1", "gpu.example.com", 2), template("v1", ["tpu.example.com"], 3)])) == 1
}

test_non_claim_objects_ignored if {
	count(deny_for([class("v1", "gpu.example.com", 2)])) == 0
}

# --- class in the cluster ---------------------------------------------------------------------

test_class_in_cluster_allowed if {
	denials := class_before_template.deny with input as doc(
		[template("v1", ["gpu.example.com"], 3)],
		[],
		live([class("v1", "gpu.example.com", 2)]),
	)
	count(denials) == 0
}

test_class_missing_in_cluster_and_change_denied if {
	denials := class_before_template.deny with input as doc(
		[template("v1", ["gpu.example.com"], 3)],
		[],
		live([class("v1", "other.example.com", 2)]),
	)
	count(denials) == 1
}

test_class_only_in_base_denied if {
	# the change deletes the class: being in the base does not keep it alive
	denials := class_before_template.deny with input as doc(
		[template("v1", ["gpu.example.com"], 3)],
		[class("v1", "gpu.example.com", 2), template("v1", ["gpu.example.com"], 3)],
		null,
	)
	count(denials) == 1
}

# --- stage overrides ------------------------------------------------------------------------------

later_stage_denied(version) if {
	denials := deny_for([class(version, "gpu.example.com", 4), template(version, ["gpu.example.com"], 3)])
	count(denials) == 1
	some v in denials
	contains(v.msg, "later stage (4)")
}

test_class_in_later_stage_denied_every_version if {
	later_stage_denied("v1alpha2")
	later_stage_denied("v1alpha3")
	later_stage_denied("v1beta1")
	later_stage_denied("v1beta2")
	later_stage_denied("v1")
}

test_class_in_later_stage_but_in_base_allowed if {
	denials := class_before_template.deny with input as doc(
		[class("v1", "gpu.example.com", 4), template("v1", ["gpu.example.com"], 3)],
		[class("v1", "gpu.example.com", 2)],
		null,
	)
	count(denials) == 0
}

test_class_in_later_stage_but_live_allowed if {
	denials := class_before_template.deny with input as doc(
		[class("v1", "gpu.example.com", 4), template("v1", ["gpu.example.com"], 3)],
		[],
		live([class("v1", "gpu.example.com", 2)]),
	)
	count(denials) == 0
}

test_class_in_later_stage_in_base_but_not_live_denied if {
	# with a cluster, the cluster decides what exists; the base does not count
	denials := class_before_template.deny with input as doc(
		[class("v1", "gpu.example.com", 4), template("v1", ["gpu.example.com"], 3)],
		[class("v1", "gpu.example.com", 2)],
		live([]),
	)
	count(denials) == 1
}

# Python's index carries each class's stage; the rule reads it from there when present.
test_class_stage_from_the_index if {
	objects := [class("v1", "gpu.example.com", 2), template("v1", ["gpu.example.com"], 3)]
	indexed := object.union(index(objects), {"device_class_stages": {"gpu.example.com": 4}})
	denials := class_before_template.deny with input as object.union(doc(objects, [], null), {"index": indexed})
	count(denials) == 1
}

# --- extended resources backed by DRA -------------------------------------------------------------

pod_workload(names, stage) := {
	"apiVersion": "apps/v1",
	"kind": "Deployment",
	"metadata": {"name": "trainer", "namespace": "ml"},
	"_dra": meta("Deployment", "ml", "trainer", "workload", "v1", stage, {"group": "apps", "extended_resources": names}),
}

mapped_class(stage) := object.union(class("v1", "gpu.example.com", stage), {"spec": {"extendedResourceName": "example.com/gpu"}})

with_extended(objects) := object.union(doc(objects, [], null), {"index": object.union(index(objects), {"extended_resources": {"example.com/gpu": "gpu.example.com"}})})

test_alias_of_a_missing_class_is_denied if {
	denials := deny_for([pod_workload(["deviceclass.resource.kubernetes.io/gpu.example.com"], 4)])
	count(denials) == 1
	some d in denials
	contains(d.msg, "requests extended resource deviceclass.resource.kubernetes.io/gpu.example.com of DeviceClass gpu.example.com, which exists neither")
}

test_alias_of_a_class_in_the_change_passes if {
	count(deny_for([class("v1", "gpu.example.com", 2), pod_workload(["deviceclass.resource.kubernetes.io/gpu.example.com"], 4)])) == 0
}

test_a_mapped_name_whose_class_comes_later_is_denied if {
	objects := [mapped_class(4), pod_workload(["example.com/gpu"], 2)]
	denials := class_before_template.deny with input as with_extended(objects)
	count(denials) == 1
	some d in denials
	contains(d.msg, "requests extended resource example.com/gpu of DeviceClass gpu.example.com, which this change applies in a later stage (4) than the workload (2)")
}

test_a_device_plugin_resource_no_class_maps_passes if {
	count(deny_for([pod_workload(["vendor.example/fpga"], 4)])) == 0
}
