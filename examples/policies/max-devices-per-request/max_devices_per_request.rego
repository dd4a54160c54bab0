# METADATA
# title: At most N devices per request
# description: >-
#   A ResourceClaim or ResourceClaimTemplate (resource.k8s.io/v1) may ask for at most
#   max_devices_per_request devices in one ExactCount request, so one team cannot take a whole node by
#   mistake. allocationMode All is allowed only with the waiver annotation.
# custom:
#   id: max-devices-per-request
#   severity: deny
package dra.max_devices_per_request

rule_id := "max-devices-per-request"

violation(obj, msg) := {
	"rule": rule_id,
	"msg": msg,
	"ref": obj._dra.ref,
	"path": obj._dra.path,
	"line": obj._dra.line,
}

param(name, default_value) := object.get(object.get(input, "params", {}), name, default_value)

limit := param("max_devices_per_request", 4)

# The claim spec: a claim's own, a template's embedded one.
claim_spec(obj) := obj.spec if obj._dra.role == "claim"

claim_spec(obj) := obj.spec.spec if obj._dra.role == "claim-template"

requests(obj) := object.get(claim_spec(obj), ["devices", "requests"], [])

v1_claims contains obj if {
	some obj in input.objects
	obj._dra.role in {"claim", "claim-template"}
	obj._dra.version == "v1"
}

deny contains v if {
	some obj in v1_claims
	some request in requests(obj)
	object.get(request, ["exactly", "allocationMode"], "ExactCount") == "ExactCount"
	n := object.get(request, ["exactly", "count"], 1)
	n > limit
	msg := sprintf(
		"%s: request %s asks for %d devices; at most %d per request are allowed (param max_devices_per_request)",
		[obj._dra.ref, request.name, n, limit],
	)
	v := violation(obj, msg)
}

deny contains v if {
	some obj in v1_claims
	some request in requests(obj)
	object.get(request, ["exactly", "allocationMode"], "") == "All"
	msg := sprintf("%s: request %s asks for all matching devices (allocationMode All)", [obj._dra.ref, request.name])
	v := violation(obj, msg)
}
