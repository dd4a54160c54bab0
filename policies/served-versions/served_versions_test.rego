package dra.served_versions_test

import data.dra.served_versions

# --- builders ---------------------------------------------------------------------------------

obj(group, version, kind) := {
	"apiVersion": api_version(group, version),
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
		"role": "other",
		"device_classes": [],
		"admin_access": false,
	},
}

api_version(group, version) := version if group == ""

api_version(group, version) := concat("/", [group, version]) if group != ""

dra(version) := obj("resource.k8s.io", version, "ResourceClaimTemplate")

taint_rule(version) := obj("resource.k8s.io", version, "DeviceTaintRule")

# group-level facts only, as inputs built before discovery by kind
cluster(served, deprecated) := {
	"version": "v1.35.0",
	"served": {"resource.k8s.io": served},
	"deprecated": {"resource.k8s.io": deprecated},
	"objects": [],
	"index": {},
}

# what `check --cluster` reads from a 1.36 server: every group's versions and each version's kinds
cluster_136(dra_versions, kinds, deprecated) := {
	"version": "v1.36.2",
	"served": {
		"": ["v1"],
		"apps": ["v1"],
		"scheduling.k8s.io": ["v1"],
		"admissionregistration.k8s.io": ["v1"],
		"resource.k8s.io": dra_versions,
	},
	"deprecated": {"resource.k8s.io": deprecated},
	"kinds": object.union(
		{
			"": {"Namespace": ["v1"], "Pod": ["v1"]},
			"apps": {"Deployment": ["v1"]},
			"scheduling.k8s.io": {"PriorityClass": ["v1"]},
			"admissionregistration.k8s.io": {
				"ValidatingAdmissionPolicy": ["v1"],
				"ValidatingAdmissionPolicyBinding": ["v1"],
			},
		},
		{"resource.k8s.io": kinds},
	),
	"unavailable": [],
	"objects": [],
	"index": {},
}

# A literal object: OPA's type checker refuses the comprehension `{k: versions | some k in [...]}` here.
four_kinds(versions) := {
	"DeviceClass": versions,
	"ResourceClaim": versions,
	"ResourceClaimTemplate": versions,
	"ResourceSlice": versions,
}

# default flags: resource.k8s.io/v1 only, which has no DeviceTaintRule on 1.36
default_136 := cluster_136(["v1"], four_kinds(["v1"]), [])

# every version switched on with --runtime-config
opted_in_136 := cluster_136(
	["v1", "v1beta2", "v1beta1", "v1alpha3"],
	object.union(
		four_kinds(["v1", "v1beta2", "v1beta1"]),
		{"DeviceTaintRule": ["v1beta2", "v1alpha3"], "ResourcePoolStatusRequest": ["v1alpha3"]},
	),
	["v1beta2", "v1beta1", "v1alpha3"],
)

doc(objects, cluster_data, params) := {
	"objects": objects,
	"base_objects": [],
	"changes": [],
	"cluster": cluster_data,
	"index": {},
	"base_index": {},
	"release": null,
	"params": params,
}

with_crd(d, versions) := object.union(d, {"index": {"crds": {"example.com": {"Widget": {
	"ref": "CustomResourceDefinition/widgets.example.com",
	"versions": versions,
}}}}})

findings_of(d) := {"deny": denials, "warn": warnings} if {
	denials := served_versions.deny with input as d
	warnings := served_versions.warn with input as d
}

findings(objects, cluster_data, params) := findings_of(doc(objects, cluster_data, params))

only_msg(set) := msg if {
	count(set) == 1
	some v in set
	msg := v.msg
}

# --- with a cluster that lists kinds per version ---------------------------------------------------

test_served_kinds_pass if {
	objects := [dra("v1"), obj("", "v1", "Namespace"), obj("apps", "v1", "Deployment")]
	f := findings(objects, default_136, {})
	count(f.deny) == 0
	count(f.warn) == 0
}

test_v1_device_taint_rule_names_the_versions_that_serve_it if {
	f := findings([taint_rule("v1")], opted_in_136, {})
	msg := only_msg(f.deny)
	contains(msg, "DeviceTaintRule/ml/one-gpu uses resource.k8s.io/v1, which the cluster (v1.36.2) does not serve for DeviceTaintRule")
	contains(msg, "use resource.k8s.io/v1beta2 for DeviceTaintRule (served: resource.k8s.io/v1beta2, resource.k8s.io/v1alpha3)")
}

test_served_group_version_without_the_kind_is_not_served if {
	f := findings([taint_rule("v1")], default_136, {})
	msg := only_msg(f.deny)
	contains(msg, "no version the cluster serves has DeviceTaintRule (resource.k8s.io: v1)")
	not contains(msg, "; use")
}

test_v1beta2_device_taint_rule_passes_where_served if {
	f := findings([taint_rule("v1beta2")], opted_in_136, {})
	count(f.deny) == 0
	# deprecated are v1beta2 DeviceClass & co, not DeviceTaintRule, and no better version serves it
	count(f.warn) == 0
}

test_pod_group_of_an_unserved_version_is_denied if {
	f := findings([obj("scheduling.k8s.io", "v1alpha2", "PodGroup")], default_136, {})
	contains(only_msg(f.deny), "no version the cluster serves has PodGroup (scheduling.k8s.io: v1)")
}

test_admission_policy_beta_is_told_to_use_v1 if {
	f := findings([obj("admissionregistration.k8s.io", "v1beta1", "ValidatingAdmissionPolicy")], default_136, {})
	contains(
		only_msg(f.deny),
		"use admissionregistration.k8s.io/v1 for ValidatingAdmissionPolicy (served: admissionregistration.k8s.io/v1)",
	)
	g := findings([obj("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy")], default_136, {})
	count(g.deny) == 0
}

test_core_kind_in_a_wrong_version_is_denied if {
	f := findings([obj("", "v2", "Pod")], default_136, {})
	contains(only_msg(f.deny), "Pod/ml/one-gpu uses v2, which the cluster (v1.36.2) does not serve for Pod; use v1 for Pod")
}

test_custom_kind_without_its_crd_is_denied if {
	f := findings([obj("example.com", "v1", "Widget")], default_136, {})
	contains(only_msg(f.deny), "no version of the cluster serves Widget: it serves no example.com version")
}

test_custom_kind_whose_crd_is_in_the_change_passes if {
	f := findings_of(with_crd(doc([obj("example.com", "v1", "Widget")], default_136, {}), ["v1"]))
	count(f.deny) == 0
	g := findings_of(with_crd(doc([obj("example.com", "v2", "Widget")], default_136, {}), ["v1"]))
	contains(only_msg(g.deny), "use example.com/v1 for Widget (served: example.com/v1)")
}

test_kinds_of_an_unreadable_group_version_are_not_judged if {
	c := object.union(default_136, {"unavailable": ["metrics.k8s.io/v1beta1"]})
	f := findings([obj("metrics.k8s.io", "v1beta1", "PodMetrics")], c, {})
	count(f.deny) == 0
	g := findings([obj("metrics.k8s.io", "v1beta1", "PodMetrics")], default_136, {})
	count(g.deny) == 1
}

test_deprecated_version_warns_with_the_version_to_use if {
	f := findings([dra("v1beta2"), taint_rule("v1alpha3")], opted_in_136, {})
	count(f.deny) == 0
	count(f.warn) == 2
	some a in f.warn
	a.ref == "ResourceClaimTemplate/ml/one-gpu"
	contains(a.msg, "marks deprecated; use resource.k8s.io/v1 for ResourceClaimTemplate")
	some b in f.warn
	b.ref == "DeviceTaintRule/ml/one-gpu"
	contains(b.msg, "marks deprecated; use resource.k8s.io/v1beta2 for DeviceTaintRule")
}

# --- with group-level cluster data only --------------------------------------------------------------

default_135 := cluster(["v1"], [])

opted_in_135 := cluster(["v1", "v1beta2", "v1beta1"], ["v1beta2", "v1beta1"])

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
	contains(v.msg, "marks deprecated; use v1 for ResourceClaimTemplate")
}

test_served_deprecated_warning_can_be_disabled if {
	f := findings([dra("v1beta2")], opted_in_135, {"deprecated_versions_warn": false})
	count(f.deny) == 0
	count(f.warn) == 0
}

test_dra_not_served_at_all_denied if {
	f := findings([dra("v1")], cluster([], []), {})
	msg := only_msg(f.deny)
	contains(msg, "serves no resource.k8s.io version")
	g := findings([dra("v1")], cluster_136([], {}, []), {})
	contains(only_msg(g.deny), "serves no resource.k8s.io version: DRA is not enabled there")
}

test_missing_served_entry_denied if {
	c := {"version": "v1.29.0", "served": {}, "deprecated": {}, "objects": [], "index": {}}
	f := findings([dra("v1")], c, {})
	count(f.deny) == 1
}

test_other_groups_not_judged_without_kinds if {
	f := findings([obj("apps", "v1", "Deployment"), obj("", "v1", "Namespace")], cluster([], []), {})
	count(f.deny) == 0
	count(f.warn) == 0
}

# --- offline, against a release's table ------------------------------------------------------------

# what reconciler/model/served.py says of Kubernetes 1.36 for these kinds
release_136 := {"version": "1.36", "known": true, "kinds": {
	"resource.k8s.io": {
		"DeviceTaintRule": {
			"versions": {"v1beta2": "opt-in", "v1alpha3": "opt-in"},
			"default": [],
			"opt_in": ["v1beta2", "v1alpha3"],
			"ranges": {"v1": "1.37", "v1beta2": "1.36-1.37", "v1alpha3": "1.33-1.37"},
			"next_default": {"release": "1.37", "versions": ["v1"]},
			"deprecated": {"v1alpha3": "deprecated in 1.36, removal planned for 1.39"},
		},
		"ResourceClaimTemplate": {
			"versions": {"v1": "default", "v1beta2": "opt-in", "v1beta1": "opt-in"},
			"default": ["v1"],
			"opt_in": ["v1beta2", "v1beta1"],
			"ranges": {
				"v1": "1.34-1.37", "v1beta2": "1.33-1.37", "v1beta1": "1.32-1.37",
				"v1alpha3": "1.31-1.33", "v1alpha2": "1.27-1.30", "v1alpha1": "1.26",
			},
			"next_default": null,
			"deprecated": {
				"v1beta2": "deprecated in 1.36, removal planned for 1.39",
				"v1beta1": "deprecated in 1.35, removal planned for 1.38",
			},
		},
	},
	"admissionregistration.k8s.io": {"ValidatingAdmissionPolicy": {
		"versions": {"v1": "default"},
		"default": ["v1"],
		"opt_in": [],
		"ranges": {"v1": "1.30-1.37", "v1beta1": "1.28-1.33", "v1alpha1": "1.26-1.31"},
		"next_default": null,
		"deprecated": {},
	}},
	"scheduling.k8s.io": {"PodGroup": {
		"versions": {"v1alpha2": "opt-in"},
		"default": [],
		"opt_in": ["v1alpha2"],
		"ranges": {"v1beta1": "1.37", "v1alpha3": "1.37", "v1alpha2": "1.36"},
		"next_default": null,
		"deprecated": {},
	}},
}}

release_134 := {"version": "1.34", "known": true, "kinds": {"scheduling.k8s.io": {"PodGroup": {
	"versions": {},
	"default": [],
	"opt_in": [],
	"ranges": {"v1beta1": "1.37", "v1alpha3": "1.37", "v1alpha2": "1.36"},
	"next_default": null,
	"deprecated": {},
}}}}

offline(objects, release) := findings_of(object.union(doc(objects, null, {}), {"release": release}))

offline_msg(o, release) := only_msg(f.warn) if {
	f := offline([o], release)
	count(f.deny) == 0
}

test_offline_default_versions_pass if {
	f := offline([dra("v1"), obj("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy")], release_136)
	count(f.deny) == 0
	count(f.warn) == 0
}

test_offline_v1beta2_device_taint_rule_is_not_told_to_use_v1 if {
	msg := offline_msg(taint_rule("v1beta2"), release_136)
	contains(msg, "uses resource.k8s.io/v1beta2, which Kubernetes 1.36 serves only when enabled (kube-apiserver --runtime-config=resource.k8s.io/v1beta2=true)")
	contains(msg, "no version of DeviceTaintRule is served by default on 1.36")
	contains(msg, "1.36 serves it in resource.k8s.io/v1alpha3, only when enabled")
	contains(msg, "1.37 serves resource.k8s.io/v1 by default")
	not contains(msg, "use v1")
	not contains(msg, "use resource.k8s.io/v1")
}

test_offline_v1_device_taint_rule_is_not_on_1_36 if {
	msg := offline_msg(taint_rule("v1"), release_136)
	contains(msg, "uses resource.k8s.io/v1, which Kubernetes 1.36 does not have for DeviceTaintRule (resource.k8s.io/v1: 1.37)")
	contains(msg, "1.36 serves it in resource.k8s.io/v1beta2, resource.k8s.io/v1alpha3, only when enabled")
}

test_offline_deprecated_beta_is_told_the_schedule_and_v1 if {
	msg := offline_msg(dra("v1beta2"), release_136)
	contains(msg, "serves only when enabled (kube-apiserver --runtime-config=resource.k8s.io/v1beta2=true), deprecated in 1.36, removal planned for 1.39")
	contains(msg, "use resource.k8s.io/v1 for ResourceClaimTemplate (served by default)")
}

test_offline_version_of_another_release_warns if {
	msg := offline_msg(dra("v1alpha3"), release_136)
	contains(msg, "does not have for ResourceClaimTemplate (resource.k8s.io/v1alpha3: 1.31-1.33); use resource.k8s.io/v1")
	vap := offline_msg(obj("admissionregistration.k8s.io", "v1beta1", "ValidatingAdmissionPolicy"), release_136)
	contains(vap, "(admissionregistration.k8s.io/v1beta1: 1.28-1.33); use admissionregistration.k8s.io/v1 for ValidatingAdmissionPolicy")
}

test_offline_alpha_kind_warns if {
	msg := offline_msg(obj("scheduling.k8s.io", "v1alpha2", "PodGroup"), release_136)
	contains(msg, "serves only when enabled (kube-apiserver --runtime-config=scheduling.k8s.io/v1alpha2=true)")
	contains(msg, "no version of PodGroup is served by default on 1.36")
	older := offline_msg(obj("scheduling.k8s.io", "v1alpha2", "PodGroup"), release_134)
	contains(older, "but Kubernetes 1.34 serves no version of PodGroup (scheduling.k8s.io/v1alpha2: 1.36)")
}

test_offline_unknown_kinds_and_releases_are_not_judged if {
	f := offline([obj("example.com", "v1alpha1", "Widget"), obj("apps", "v1beta1", "Deployment")], release_136)
	count(f.warn) == 0
	g := offline([taint_rule("v1")], {"version": "1.40", "known": false, "kinds": {}})
	count(g.warn) == 0
}

test_offline_crd_of_the_change_decides_its_kind if {
	ok := findings_of(with_crd(object.union(doc([obj("example.com", "v1", "Widget")], null, {}), {"release": release_136}), ["v1"]))
	count(ok.warn) == 0
	bad := findings_of(with_crd(object.union(doc([obj("example.com", "v2", "Widget")], null, {}), {"release": release_136}), ["v1"]))
	contains(only_msg(bad.warn), "which its CustomResourceDefinition CustomResourceDefinition/widgets.example.com does not serve; it serves example.com/v1")
}

test_offline_without_a_release_block_judges_nothing if {
	warnings := served_versions.warn with input as {"objects": [dra("v1beta1")], "params": {}}
	count(warnings) == 0
}
