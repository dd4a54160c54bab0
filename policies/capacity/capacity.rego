# METADATA
# title: Pods of the change get their devices
# description: >-
#   With cluster data (`check --cluster`, `plan`, `apply`), Python places every pod the change adds
#   (a Pod, one per replica of a workload, a DaemonSet's one per node) the way kube-scheduler does:
#   in the scheduler's order, node by node, all of a pod's claims allocated together from the devices
#   reachable from that node (published in ResourceSlices, minus what allocated claims hold), CEL
#   selectors, taints, constraints, partitions and shared capacity included. A pod that cannot be
#   placed is a warning, or a denial when the param `capacity_deny` is true; the message names the
#   pod and why each node was rejected. A pod the model cannot decide ("unknown") is never reported:
#   no false denials. Offline (no cluster data) the rule does nothing.
# custom:
#   id: capacity
#   severity: warn
package dra.capacity

rule_id := "capacity"

param(name, default_value) := object.get(object.get(input, "params", {}), name, default_value)

failures := [f |
	capacity := object.get(input, "capacity", null)
	capacity != null
	some f in object.get(capacity, "failures", [])
]

finding(f) := {
	"rule": rule_id,
	"msg": sprintf(
		"%s: %s cannot be scheduled: %s; free devices, add nodes with devices, or lower the request",
		[f.ref, f.subject, f.reason],
	),
	"ref": f.ref,
	"path": f.path,
	"line": f.line,
}

deny contains v if {
	param("capacity_deny", false) == true
	some f in failures
	v := finding(f)
}

warn contains v if {
	param("capacity_deny", false) != true
	some f in failures
	v := finding(f)
}
