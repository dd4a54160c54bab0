package dra.admin_access_test

import data.dra.admin_access

# --- builders ---------------------------------------------------------------------------------

claim(kind, role, version, ns, admin) := {
	"apiVersion": concat("/", ["resource.k8s.io", version]),
	"kind": kind,
	"metadata": {"name": "all-gpus", "namespace": ns},
	"_dra": {
		"ref": concat("/", [kind, ns, "all-gpus"]),
		"group": "resource.k8s.io",
		"version": version,
		"kind": kind,
		"namespace": ns,
		"name": "all-gpus",
		"path": "claims/admin.yaml",
		"line": 9,
		"stage": 3,
		"role": role,
		"device_classes": ["gpu.example.com"],
		"admin_access": admin,
	},
}

template(version, ns, admin) := claim("ResourceClaimTemplate", "claim-template", version, ns, admin)

namespaces(entries) := {"namespaces": {name: {"ref": concat("/", ["Namespace", name]), "labels": labels} |
	some name, labels in entries
}}

admin_label := {"resource.kubernetes.io/admin-access": "true"}

doc(objects, head_namespaces, cluster_namespaces, params) := {
	"objects": objects,
	"base_objects": [],
	"changes": [],
	"cluster": cluster_of(cluster_namespaces),
	"index": namespaces(head_namespaces),
	"base_index": {},
	"params": params,
}

cluster_of(null) := null

cluster_of(entries) := {
	"version": "v1.34.0",
	"served": {"resource.k8s.io": ["v1"]},
	"deprecated": {"resource.k8s.io": []},
	"objects": [],
	"index": namespaces(entries),
} if entries != null

denials(objects, head_namespaces, cluster_namespaces) := result if {
	result := admin_access.deny with input as doc(objects, head_namespaces, cluster_namespaces, {})
}

versions := ["v1alpha3", "v1beta1", "v1beta2", "v1"]

# --- allowed ------------------------------------------------------------------------------------

test_labelled_namespace_in_change_allowed_every_version if {
	every version in versions {
		count(denials([template(version, "mon", true)], {"mon": admin_label}, null)) == 0
	}
}

test_labelled_namespace_in_cluster_allowed if {
	count(denials([template("v1", "mon", true)], {}, {"mon": admin_label})) == 0
}

test_no_admin_access_allowed if {
	count(denials([template("v1", "ml", false)], {"ml": {}}, null)) == 0
	count(denials([template("v1", "unknown", false)], {}, null)) == 0
}

test_claim_in_labelled_namespace_allowed if {
	c := claim("ResourceClaim", "claim", "v1", "mon", true)
	count(denials([c], {"mon": admin_label}, null)) == 0
}

test_custom_label_key_param if {
	old_key := {"resource.k8s.io/admin-access": "true"}
	result := admin_access.deny with input as doc(
		[template("v1beta1", "mon", true)],
		{"mon": old_key},
		null,
		{"admin_namespace_label": "resource.k8s.io/admin-access"},
	)
	count(result) == 0
}

# --- denied -------------------------------------------------------------------------------------

test_unlabelled_namespace_denied_every_version if {
	every version in versions {
		count(denials([template(version, "ml", true)], {"ml": {}}, null)) == 1
	}
}

test_unlabelled_namespace_message if {
	result := denials([template("v1", "ml", true)], {"ml": {"team": "ml"}}, null)
	result == {{
		"rule": "admin-access",
		"msg": "ResourceClaimTemplate/ml/all-gpus requests adminAccess, but namespace ml is not labelled resource.kubernetes.io/admin-access: \"true\"; the API server rejects it",
		"ref": "ResourceClaimTemplate/ml/all-gpus",
		"path": "claims/admin.yaml",
		"line": 9,
	}}
}

test_label_false_denied if {
	count(denials([template("v1", "ml", true)], {"ml": {"resource.kubernetes.io/admin-access": "false"}}, null)) == 1
}

test_old_label_key_denied_by_default if {
	# 1.33 used resource.k8s.io/admin-access; 1.34+ require resource.kubernetes.io/admin-access
	count(denials([template("v1", "ml", true)], {"ml": {"resource.k8s.io/admin-access": "true"}}, null)) == 1
}

test_namespace_without_labels_key_denied if {
	result := admin_access.deny with input as {
		"objects": [template("v1", "ml", true)],
		"cluster": null,
		"index": {"namespaces": {"ml": {"ref": "Namespace/ml"}}},
		"params": {},
	}
	count(result) == 1
}

test_desired_state_wins_over_cluster if {
	# the change drops the label the cluster still has
	count(denials([template("v1", "mon", true)], {"mon": {}}, {"mon": admin_label})) == 1
}

test_claim_in_unlabelled_namespace_denied if {
	c := claim("ResourceClaim", "claim", "v1", "ml", true)
	count(denials([c], {"ml": {}}, {"ml": {}})) == 1
}

test_unknown_namespace_denied if {
	result := denials([template("v1", "ghost", true)], {}, {})
	count(result) == 1
	some v in result
	contains(v.msg, "can't be verified")
}

test_unknown_namespace_offline_denied if {
	result := denials([template("v1", "ghost", true)], {}, null)
	count(result) == 1
	some v in result
	contains(v.msg, "can't be verified")
}
