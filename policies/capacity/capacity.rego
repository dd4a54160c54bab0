# METADATA
# title: Claims of the change fit the free devices
# description: >-
#   With cluster data (`check --cluster`, `plan`, `apply`), Python simulates allocating every claim the
#   change creates (ResourceClaims, and one generated claim per replica of a workload using a template)
#   against the devices the drivers publish in ResourceSlices, minus those already allocated, evaluating
#   the CEL selectors of classes and requests. A claim that does not fit is a warning, or a denial when
#   the param `capacity_deny` is true. A claim whose selectors cannot be evaluated ("unknown") is never
#   reported: no false denials. Offline (no cluster data) the rule does nothing.
# custom:
#   id: capacity
#   severity: warn
package dra.capacity

rule_id := "capacity"

param(name, default_value) := object.get(object.get(input, "params", {}), name, default_value)

short_claims := [c |
	capacity := object.get(input, "capacity", null)
	capacity != null
	some c in object.get(capacity, "claims", [])
	c.outcome == "does-not-fit"
]

finding(c) := {
	"rule": rule_id,
	"msg": sprintf(
		"%s needs %d device(s) for claim %s but only %d of %d matching device(s) are free; free devices, add nodes with devices, or lower the request",
		[c.ref, c.needed, c.claim, c.free, c.total],
	),
	"ref": c.ref,
	"path": c.path,
	"line": c.line,
}

deny contains f if {
	param("capacity_deny", false) == true
	some c in short_claims
	f := finding(c)
}

warn contains f if {
	param("capacity_deny", false) != true
	some c in short_claims
	f := finding(c)
}
