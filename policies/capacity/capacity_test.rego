package dra.capacity_test

import data.dra.capacity

claim(outcome) := {
	"ref": "Deployment/ml/trainer",
	"path": "40-workloads/trainer.yaml",
	"line": 3,
	"claim": "ml/trainer-gpu-2",
	"outcome": outcome,
	"needed": 1,
	"free": 0,
	"total": 2,
	"reason": "",
}

test_no_cluster_data_no_finding if {
	count(capacity.warn) == 0 with input as {"capacity": null, "params": {}}
	count(capacity.deny) == 0 with input as {"params": {}}
}

test_fitting_claims_pass if {
	count(capacity.warn) == 0 with input as {"capacity": {"claims": [claim("fits")]}, "params": {}}
}

test_unknown_is_never_reported if {
	inp := {"capacity": {"claims": [claim("unknown")]}, "params": {"capacity_deny": true}}
	count(capacity.warn) == 0 with input as inp
	count(capacity.deny) == 0 with input as inp
}

test_short_claim_warns_by_default if {
	inp := {"capacity": {"claims": [claim("fits"), claim("does-not-fit")]}, "params": {}}
	count(capacity.deny) == 0 with input as inp
	some f in capacity.warn with input as inp
	f.rule == "capacity"
	f.path == "40-workloads/trainer.yaml"
	f.line == 3
	contains(f.msg, "only 0 of 2")
}

test_short_claim_denies_with_param if {
	inp := {"capacity": {"claims": [claim("does-not-fit")]}, "params": {"capacity_deny": true}}
	count(capacity.warn) == 0 with input as inp
	count(capacity.deny) == 1 with input as inp
}
