# METADATA
# title: No deleting classes, templates or claims that are still used
# description: >-
#   A change must not delete a DeviceClass (or v1alpha* ResourceClass) that a claim or template still
#   requests, nor a ResourceClaimTemplate or ResourceClaim that a workload still references. Users are
#   the objects of the desired state and, with cluster data, live objects that this change neither
#   manages nor deletes (generated claims, pods, other teams' workloads); live objects whose owner the
#   change deletes (the pods of a deleted Deployment, Job, StatefulSet or DaemonSet, their generated
#   claims) go with it and are not users.
# custom:
#   id: no-delete-in-use
#   severity: deny
package dra.no_delete_in_use

rule_id := "no-delete-in-use"

violation(obj, msg) := {
	"rule": rule_id,
	"msg": msg,
	"ref": obj._dra.ref,
	"path": obj._dra.path,
	"line": obj._dra.line,
}

# What a deleted object is referenced by: the `_dra` list that holds it and the key it appears under.
uses_field := {
	"DeviceClass": "device_classes",
	"ResourceClass": "device_classes",
	"ResourceClaimTemplate": "claim_templates",
	"ResourceClaim": "claims",
}

key_of(obj) := obj._dra.name if obj._dra.namespace == ""

key_of(obj) := concat("/", [obj._dra.namespace, obj._dra.name]) if obj._dra.namespace != ""

deleted_refs := {change.ref | some change in input.changes; change.op == "delete"}

head_refs := {obj._dra.ref | some obj in input.objects}

# Live objects the change does not manage (not in the desired state) and does not delete, directly or
# through an owner it deletes (`_dra.removed_with`: the pods of a deleted Deployment go with it).
unmanaged_live contains obj if {
	input.cluster != null
	some obj in object.get(input.cluster, "objects", [])
	not obj._dra.ref in head_refs
	not obj._dra.ref in deleted_refs
	not obj._dra.removed_with
}

candidates contains obj if {
	some obj in input.objects
}

candidates contains obj if {
	some obj in unmanaged_live
}

users(field, key) := {obj._dra.ref |
	some obj in candidates
	key in object.get(obj._dra, field, [])
}

# At most five refs, then how many more.
describe(refs) := concat(", ", sorted) if {
	count(refs) <= 5
	sorted := sort(refs)
} else := sprintf("%s and %d more", [concat(", ", [r | some i, r in sort(refs); i < 5]), count(refs) - 5])

deny contains v if {
	some change in input.changes
	change.op == "delete"
	old := change.old
	field := uses_field[old._dra.kind]
	in_use := users(field, key_of(old))
	count(in_use) > 0
	msg := sprintf(
		"%s is deleted but still used by %s; remove or change the users first (or in this change)",
		[old._dra.ref, describe(in_use)],
	)
	v := violation(old, msg)
}
