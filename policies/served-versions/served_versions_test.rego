package dra.served_versions_test

import data.dra.served_versions

# --- builders ---------------------------------------------------------------------------------

obj(group, version, kind) := {
	"apiVersion": concat("/", [group, version]),
	"kind": kind,
	"metadata": {"name": "one-gpu", "namespace": "ml"},
	"_dra": {
		"ref": concat("/", [kind, "ml", "one-gpu"]),
		"group": group,
		"version": version,
		"kind": kind,
		"namespace": "ml",
		"name": "one-gpu",
		"path": "claims.yaml",
		"line": 12,
		"stage": 3,
		"role": "claim-template",
		"device_classes": [],
		"admin_access": false,
	},
}

dra(version) := obj("resource.k8s.io", version, "ResourceClaimTemplate")

cluster(served, deprecated) := {
	"version": "v1.35.0",
	"served": {"resource.k8s.io": served},
	"deprecated": {"resource.k8s.io": deprecated},
	"objects": [],
	"index": {},
}

doc(objects, cluster_data, params) := {
	"objects": objects,
	"base_objects": [],
	"changes": [],
	"cluster": cluster_data,
	"index": {},
	"base_index": {},
	"params": params,
}

findings(objects, cluster_data, params) := {"deny": denials, "warn": warnings} if {
	denials := served_versions.deny with input as doc(objects, cluster_data, params)
	warnings := served_versions.warn with input as doc(objects, cluster_data, params)
}

# 1.35 defaults: v1 only; with v1beta1/v1beta2 switched on they are deprecated.
default_135 := cluster(["v1"], [])

opted_in_135 := cluster(["v1", "v1beta2", "v1beta1"], ["v1beta2", "v1beta1"])

# --- with a cluster -------------------------------------------------------------------------------

test_v1_on_current_cluster_allowed if {
	f := findings([dra("v1")], default_135, {})
	count(f.deny) == 0
	count(f.warn) == 0
}

not_served(version) if {
	f := findings([dra(version)], default_135, {})
	count(f.deny) == 1
	some v in f.deny
	v.rule == "served-versions"
	v.ref == "ResourceClaimTemplate/ml/one-gpu"
	v.path == "claims.yaml"
	v.line == 12
	contains(v.msg, concat("", ["resource.k8s.io/", version, ", which the cluster (v1.35.0) does not serve; served: v1"]))
}

test_not_served_denied_every_version if {
	not_served("v1alpha2")
	not_served("v1alpha3")
	not_served("v1beta1")
	not_served("v1beta2")
}

test_v1_on_old_cluster_denied if {
	# a 1.33 cluster with the betas switched on does not know v1
	f := findings([dra("v1")], cluster(["v1beta2", "v1beta1", "v1alpha3"], []), {})
	count(f.deny) == 1
}

test_v1alpha2_on_130_cluster_allowed if {
	f := findings([dra("v1alpha2")], cluster(["v1alpha2"], []), {})
	count(f.deny) == 0
	count(f.warn) == 0
}

test_served_deprecated_warns if {
	f := findings([dra("v1beta1"), dra("v1beta2")], opted_in_135, {})
	count(f.deny) == 0
	count(f.warn) == 2
	some v in f.warn
	contains(v.msg, "marks deprecated")
}

test_served_deprecated_warning_can_be_disabled if {
	f := findings([dra("v1beta2")], opted_in_135, {"deprecated_versions_warn": false})
	count(f.deny) == 0
	count(f.warn) == 0
}

test_dra_not_served_at_all_denied if {
	f := findings([dra("v1")], cluster([], []), {})
	count(f.deny) == 1
	some v in f.deny
	contains(v.msg, "serves no resource.k8s.io version")
}

test_missing_served_entry_denied if {
	c := {"version": "v1.29.0", "served": {}, "deprecated": {}, "objects": [], "index": {}}
	f := findings([dra("v1")], c, {})
	count(f.deny) == 1
}

test_other_groups_ignored_with_cluster if {
	f := findings([obj("apps", "v1", "Deployment"), obj("", "v1", "Namespace")], cluster([], []), {})
	count(f.deny) == 0
	count(f.warn) == 0
}

# --- offline --------------------------------------------------------------------------------------

offline_warns(version, fragment) if {
	f := findings([dra(version)], null, {})
	count(f.deny) == 0
	count(f.warn) == 1
	some v in f.warn
	contains(v.msg, fragment)
}

test_offline_v1_allowed if {
	f := findings([dra("v1")], null, {})
	count(f.deny) == 0
	count(f.warn) == 0
}

test_offline_alpha_warns if {
	offline_warns("v1alpha1", "not served by default on current clusters")
	offline_warns("v1alpha2", "not served by default on current clusters")
	offline_warns("v1alpha3", "not served by default on current clusters")
}

test_offline_v1beta1_warns if {
	offline_warns("v1beta1", "not served by default on current clusters")
}

test_offline_v1beta2_warns if {
	offline_warns("v1beta2", "deprecated")
	offline_warns("v1beta2", "use v1")
}

test_offline_v1beta2_warning_can_be_disabled if {
	f := findings([dra("v1beta2")], null, {"deprecated_versions_warn": false})
	count(f.warn) == 0
}

test_offline_without_cluster_key if {
	# an input that leaves the cluster key out entirely counts as offline
	warnings := served_versions.warn with input as {"objects": [dra("v1beta1")], "params": {}}
	count(warnings) == 1
}

test_offline_other_groups_ignored if {
	f := findings([obj("apps", "v1", "Deployment"), obj("example.com", "v1alpha1", "Widget")], null, {})
	count(f.warn) == 0
}
