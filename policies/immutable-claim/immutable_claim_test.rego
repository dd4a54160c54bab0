package dra.immutable_claim_test

import data.dra.immutable_claim

# --- builders ---------------------------------------------------------------------------------

obj(kind, version, spec, classes, admin) := {
	"apiVersion": concat("/", ["resource.k8s.io", version]),
	"kind": kind,
	"metadata": {"name": "shared-gpu", "namespace": "ml", "labels": {"team": "ml"}},
	"spec": spec,
	"_dra": {
		"ref": concat("/", [kind, "ml", "shared-gpu"]),
		"group": "resource.k8s.io",
		"version": version,
		"kind": kind,
		"namespace": "ml",
		"name": "shared-gpu",
		"path": "30-claims/shared.yaml",
		"line": 4,
		"stage": 3,
		"role": "claim",
		"device_classes": classes,
		"admin_access": admin,
	},
}

# v1beta2/v1 request shape (`exactly`) and v1alpha3/v1beta1 flat shape, v1alpha2 resourceClassName.
spec_for(version, class, n) := {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class, "count": n}}]}} if {
	version in {"v1beta2", "v1"}
}

spec_for(version, class, n) := {"devices": {"requests": [{"name": "gpu", "deviceClassName": class, "count": n}]}} if {
	version in {"v1alpha3", "v1beta1"}
}

spec_for("v1alpha2", class, _) := {"resourceClassName": class}

claim(version, class, n) := obj("ResourceClaim", version, spec_for(version, class, n), [class], false)

template(version, class, n) := obj(
	"ResourceClaimTemplate", version, {"spec": spec_for(version, class, n)}, [class], false,
)

update(old, new) := {"op": "update", "ref": new._dra.ref, "stage": 3, "old": old, "new": new, "driver_change": false}

denials(changes) := result if {
	result := immutable_claim.deny with input as {
		"objects": [],
		"base_objects": [],
		"changes": changes,
		"cluster": null,
		"index": {},
		"base_index": {},
		"params": {},
	}
}

versions := ["v1alpha3", "v1beta1", "v1beta2", "v1"]

# --- allowed ------------------------------------------------------------------------------------

test_unchanged_spec_allowed_every_version if {
	every version in versions {
		count(denials([update(claim(version, "gpu.example.com", 1), claim(version, "gpu.example.com", 1))])) == 0
	}
	count(denials([update(claim("v1alpha2", "gpu.example.com", 1), claim("v1alpha2", "gpu.example.com", 1))])) == 0
}

test_metadata_only_change_allowed if {
	old := claim("v1", "gpu.example.com", 1)
	new := object.union(old, {"metadata": {"labels": {"team": "research"}}})
	count(denials([update(old, new)])) == 0
}

test_create_and_delete_allowed if {
	c := claim("v1", "gpu.example.com", 1)
	create := {"op": "create", "ref": c._dra.ref, "stage": 3, "old": null, "new": c, "driver_change": false}
	delete := {"op": "delete", "ref": c._dra.ref, "stage": 3, "old": c, "new": null, "driver_change": false}
	count(denials([create, delete])) == 0
}

test_version_migration_same_meaning_allowed if {
	# v1beta1 -> v1 rewrites the request shape but asks for the same class
	count(denials([update(claim("v1beta1", "gpu.example.com", 1), claim("v1", "gpu.example.com", 1))])) == 0
}

test_other_kinds_ignored if {
	old := object.union(claim("v1", "gpu.example.com", 1), {"_dra": {"kind": "DeviceClass"}})
	new := object.union(claim("v1", "other.example.com", 1), {"_dra": {"kind": "DeviceClass"}})
	count(denials([update(old, new)])) == 0
}

# --- denied -------------------------------------------------------------------------------------

changed_claim_denied(version) if {
	result := denials([update(claim(version, "gpu.example.com", 1), claim(version, "gpu.example.com", 2))])
	count(result) == 1
	some v in result
	v.rule == "immutable-claim"
	v.ref == "ResourceClaim/ml/shared-gpu"
	v.path == "30-claims/shared.yaml"
	v.line == 4
	contains(v.msg, "needs delete-and-recreate")
}

test_changed_claim_spec_denied_every_version if {
	changed_claim_denied("v1alpha3")
	changed_claim_denied("v1beta1")
	changed_claim_denied("v1beta2")
	changed_claim_denied("v1")
}

test_changed_v1alpha2_claim_denied if {
	count(denials([update(claim("v1alpha2", "gpu.example.com", 1), claim("v1alpha2", "tpu.example.com", 1))])) == 1
}

test_changed_template_spec_denied if {
	result := denials([update(template("v1", "gpu.example.com", 1), template("v1", "gpu.example.com", 2))])
	count(result) == 1
	some v in result
	contains(v.msg, "ResourceClaimTemplate/ml/shared-gpu changes its spec")
}

test_version_migration_with_new_class_denied if {
	count(denials([update(claim("v1beta1", "gpu.example.com", 1), claim("v1", "big-gpu.example.com", 1))])) == 1
}

test_version_migration_with_admin_access_denied if {
	old := claim("v1beta2", "gpu.example.com", 1)
	new := object.union(claim("v1", "gpu.example.com", 1), {"_dra": {"admin_access": true}})
	count(denials([update(old, new)])) == 1
}

# --- a delivery that recreates them (a requested rollback) -----------------------------------------

recreating(changes) := {"deny": d, "warn": w} if {
	doc := {
		"objects": [],
		"base_objects": [],
		"changes": changes,
		"cluster": null,
		"index": {},
		"base_index": {},
		"params": {"recreate_immutable": true},
	}
	d := immutable_claim.deny with input as doc
	w := immutable_claim.warn with input as doc
}

test_changed_spec_warned_when_the_delivery_recreates if {
	result := recreating([update(claim("v1", "gpu.example.com", 1), claim("v1", "gpu.example.com", 2))])
	count(result.deny) == 0
	count(result.warn) == 1
	some v in result.warn
	v.rule == "immutable-claim"
	contains(v.msg, "this delivery deletes and recreates it")
}

test_unchanged_spec_not_warned_when_the_delivery_recreates if {
	result := recreating([update(claim("v1", "gpu.example.com", 1), claim("v1", "gpu.example.com", 1))])
	count(result.deny) == 0
	count(result.warn) == 0
}
