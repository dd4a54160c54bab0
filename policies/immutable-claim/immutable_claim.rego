# METADATA
# title: Changed ResourceClaim specs need delete-and-recreate
# description: >-
#   The spec of a ResourceClaim (and of a ResourceClaimTemplate) is immutable: an update that changes
#   it is rejected by the API server. Such a change must delete and recreate the object (or use a new
#   name), so it is flagged before apply; a delivery that recreates them itself (param
#   recreate_immutable: a requested rollback) gets a warning instead. Across an apiVersion change the specs are compared by what
#   the model extracts (device classes, adminAccess), since the raw shapes differ by version.
# custom:
#   id: immutable-claim
#   severity: deny
package dra.immutable_claim

rule_id := "immutable-claim"

violation(obj, msg) := {
	"rule": rule_id,
	"msg": msg,
	"ref": obj._dra.ref,
	"path": obj._dra.path,
	"line": obj._dra.line,
}

advice := {
	"ResourceClaim": "delete and recreate the claim (pods using it must be recreated too) or give it a new name",
	"ResourceClaimTemplate": "delete and recreate the template or give it a new name (and update the pods' resourceClaimTemplateName); claims already generated keep the old spec",
}

updates contains change if {
	some change in input.changes
	change.op == "update"
	object.get(advice, change.new._dra.kind, null) != null
}

summary(obj) := {
	"device_classes": {c | some c in object.get(obj._dra, "device_classes", [])},
	"admin_access": object.get(obj._dra, "admin_access", false),
}

spec_changed(change) if {
	change.old._dra.version == change.new._dra.version
	object.get(change.old, "spec", {}) != object.get(change.new, "spec", {})
}

spec_changed(change) if {
	change.old._dra.version != change.new._dra.version
	summary(change.old) != summary(change.new)
}

immutable_message(new) := sprintf(
	"%s changes its spec, which is immutable: the update would be rejected and needs delete-and-recreate; %s",
	[new._dra.ref, advice[new._dra.kind]],
)

deny contains v if {
	not input.params.recreate_immutable
	some change in updates
	spec_changed(change)
	v := violation(change.new, immutable_message(change.new))
}

# A delivery that deletes and recreates such objects itself (a requested rollback) is told, not stopped.
warn contains v if {
	input.params.recreate_immutable == true
	some change in updates
	spec_changed(change)
	msg := sprintf("%s (this delivery deletes and recreates it)", [immutable_message(change.new)])
	v := violation(change.new, msg)
}
