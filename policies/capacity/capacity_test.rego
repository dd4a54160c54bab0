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

selector_error := {
	"ref": "DeviceClass/big-gpu.example.com", "path": "20-classes/big.yaml", "line": 1,
	"every": true, "devices": ["n1/gpu-0", "n1/gpu-1"], "matching": 0,
	"message": "class big-gpu.example.com selector #0 fails at run time (no such key: productName) on 2 device(s)",
}

test_selector_failing_on_every_device_denies_without_param if {
	inp := {"capacity": {"failures": [], "selector_errors": [selector_error]}, "params": {}}
	some f in capacity.deny with input as inp
	f.path == "20-classes/big.yaml"
	f.msg == "DeviceClass/big-gpu.example.com: class big-gpu.example.com selector #0 fails at run time (no such key: productName) on 2 device(s)"
	count(capacity.warn) == 0 with input as inp
}

test_selector_failing_on_some_devices_warns if {
	some_devices := object.union(selector_error, {"every": false, "matching": 2})
	inp := {"capacity": {"failures": [], "selector_errors": [some_devices]}, "params": {"capacity_deny": true}}
	count(capacity.deny) == 0 with input as inp
	count(capacity.warn) == 1 with input as inp
}

test_failure_advice_replaces_the_default if {
	missing := object.union(failure, {
		"reason": "claim gpu: ResourceClaimTemplate ml/absent does not exist",
		"advice": "create the ResourceClaimTemplate or fix the pod's resourceClaims",
	})
	some f in capacity.warn with input as {"capacity": {"failures": [missing]}, "params": {}}
	endswith(f.msg, "does not exist; create the ResourceClaimTemplate or fix the pod's resourceClaims")
	not contains(f.msg, "free devices")
}

at_risk_failure := object.union(failure, {
	"pods": ["ml/trainer-3"],
	"subject": "pod ml/trainer-3 (1 of 4)",
	"reason": "fits in 1 of 2 equally likely placements; where it does not: node-1, node-2: claim gpu: needs 2, 1 of 2 matching devices free (1 held by pods placed before it)",
	"advice": "where the scheduler puts ml/trainer-0 decides it (equal scores); one more matching device on node-1, node-2, fewer devices per claim, a matchAttribute, or a nodeSelector that keeps the earlier pods off the node this one needs removes the risk",
	"at_risk": true,
})

test_at_risk_pod_warns_even_with_capacity_deny if {
	inp := {"capacity": {"failures": [at_risk_failure]}, "params": {"capacity_deny": true}}
	count(capacity.deny) == 0 with input as inp
	some f in capacity.warn with input as inp
	contains(f.msg, "pod ml/trainer-3 (1 of 4) may not be scheduled: fits in 1 of 2 equally likely placements")
	contains(f.msg, "removes the risk")
}

test_at_risk_pod_denies_with_its_param if {
	inp := {"capacity": {"failures": [at_risk_failure, failure]}, "params": {"capacity_deny_at_risk": true}}
	count(capacity.deny) == 1 with input as inp
	some d in capacity.deny with input as inp
	contains(d.msg, "may not be scheduled")
	count(capacity.warn) == 1 with input as inp
	some w in capacity.warn with input as inp
	contains(w.msg, "cannot be scheduled")
}
