package dra.capacity_test

import data.dra.capacity

failure := {
	"ref": "Deployment/ml/trainer",
	"path": "40-workloads/trainer.yaml",
	"line": 3,
	"pods": ["ml/trainer-2"],
	"of": 3,
	"subject": "pod ml/trainer-2 (1 of 3)",
	"reason": "node-1: claim gpu: needs 1, 0 of 2 matching devices free (2 allocated)",
}

fitting_pod := {
	"ref": "Deployment/ml/trainer", "path": "40-workloads/trainer.yaml", "line": 3,
	"pod": "ml/trainer-0", "outcome": "fits", "node": "node-1", "reason": "",
}

test_no_cluster_data_no_finding if {
	count(capacity.warn) == 0 with input as {"capacity": null, "params": {}}
	count(capacity.deny) == 0 with input as {"params": {}}
}

test_fitting_pods_pass if {
	count(capacity.warn) == 0 with input as {"capacity": {"pods": [fitting_pod], "failures": []}, "params": {}}
}

test_unknown_is_never_reported if {
	unknown_pod := object.union(fitting_pod, {"outcome": "unknown", "node": null})
	inp := {"capacity": {"pods": [unknown_pod], "failures": []}, "params": {"capacity_deny": true}}
	count(capacity.warn) == 0 with input as inp
	count(capacity.deny) == 0 with input as inp
}

test_pod_that_does_not_fit_warns_by_default if {
	inp := {"capacity": {"pods": [fitting_pod], "failures": [failure]}, "params": {}}
	count(capacity.deny) == 0 with input as inp
	some f in capacity.warn with input as inp
	f.rule == "capacity"
	f.path == "40-workloads/trainer.yaml"
	f.line == 3
	contains(f.msg, "pod ml/trainer-2 (1 of 3) cannot be scheduled")
	contains(f.msg, "node-1: claim gpu: needs 1, 0 of 2 matching devices free (2 allocated)")
}

test_pod_that_does_not_fit_denies_with_param if {
	inp := {"capacity": {"failures": [failure]}, "params": {"capacity_deny": true}}
	count(capacity.warn) == 0 with input as inp
	count(capacity.deny) == 1 with input as inp
}
