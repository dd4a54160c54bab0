# METADATA
# title: Pods of the change get their devices
# description: >-
#   With cluster data (`check --cluster`, `plan`, `apply`), Python places every pod the change adds
#   (a Pod, one per replica of a workload, a DaemonSet's one per node) the way kube-scheduler does:
#   in the scheduler's order, node by node, all of a pod's claims allocated together from the devices
#   reachable from that node (published in ResourceSlices, minus what allocated claims hold), CEL
#   selectors, taints, constraints, partitions and shared capacity included. A pod that cannot be
#   placed is a warning, or a denial when the param `capacity_deny` is true; the message names the
#   pod and why each node was rejected. Nodes that score equal best are ties the scheduler breaks
#   unpredictably: a pod that fits in some of the placements they allow and not in others is
#   "at-risk", a warning (a denial with the param `capacity_deny_at_risk`) that gives the share, the
#   earlier pods whose placement decides it and what removes the risk. A pod the model cannot decide ("unknown") is never reported:
#   no false denials. A class or request selector of the change's pods that fails at run time (reads
#   a key the devices do not publish) is denied when no device matches without failing (the pods would
#   stay Pending with SchedulerError), and warned about, naming the devices, when some do. Offline (no
#   cluster data) the rule does nothing.
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

at_risk(f) if object.get(f, "at_risk", false) == true

verb(f) := "may not be scheduled" if at_risk(f)

verb(f) := "cannot be scheduled" if not at_risk(f)

finding(f) := {
	"rule": rule_id,
	"msg": sprintf(
		"%s: %s %s: %s; %s",
		[f.ref, f.subject, verb(f), f.reason, object.get(f, "advice", "free devices, add nodes with devices, or lower the request")],
	),
	"ref": f.ref,
	"path": f.path,
	"line": f.line,
}

selector_errors := [e |
	capacity := object.get(input, "capacity", null)
	capacity != null
	some e in object.get(capacity, "selector_errors", [])
]

selector_finding(e) := {
	"rule": rule_id,
	"msg": sprintf("%s: %s", [e.ref, e.message]),
	"ref": e.ref,
	"path": e.path,
	"line": e.line,
}

deny contains v if {
	some e in selector_errors
	e.every == true
	v := selector_finding(e)
}

warn contains v if {
	some e in selector_errors
	e.every != true
	v := selector_finding(e)
}

deny contains v if {
	param("capacity_deny", false) == true
	some f in failures
	not at_risk(f)
	v := finding(f)
}

warn contains v if {
	param("capacity_deny", false) != true
	some f in failures
	not at_risk(f)
	v := finding(f)
}

deny contains v if {
	param("capacity_deny_at_risk", false) == true
	some f in failures
	at_risk(f)
	v := finding(f)
}

warn contains v if {
	param("capacity_deny_at_risk", false) != true
	some f in failures
	at_risk(f)
	v := finding(f)
}
