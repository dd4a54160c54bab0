package dra.max_devices_per_request_test

import data.dra.max_devices_per_request

template(count_value, mode) := {
	"apiVersion": "resource.k8s.io/v1",
	"kind": "ResourceClaimTemplate",
	"metadata": {"name": "big", "namespace": "ml"},
	"spec": {"spec": {"devices": {"requests": [{
		"name": "gpu",
		"exactly": {"deviceClassName": "gpu.example.com", "allocationMode": mode, "count": count_value},
	}]}}},
	"_dra": {
		"ref": "ResourceClaimTemplate/ml/big", "role": "claim-template", "version": "v1",
		"path": "claims/big.yaml", "line": 1,
	},
}

test_within_the_limit_passes if {
	count(max_devices_per_request.deny) == 0 with input as {"objects": [template(4, "ExactCount")]}
}

test_over_the_limit_is_denied if {
	some v in max_devices_per_request.deny with input as {"objects": [template(5, "ExactCount")]}
	v.ref == "ResourceClaimTemplate/ml/big"
	v.path == "claims/big.yaml"
	contains(v.msg, "asks for 5 devices; at most 4")
}

test_the_limit_is_a_param if {
	count(max_devices_per_request.deny) == 0 with input as {
		"objects": [template(8, "ExactCount")],
		"params": {"max_devices_per_request": 8},
	}
}

test_allocation_mode_all_is_denied if {
	some v in max_devices_per_request.deny with input as {"objects": [template(1, "All")]}
	contains(v.msg, "allocationMode All")
}

test_other_versions_are_left_alone if {
	obj := object.union(template(9, "ExactCount"), {"_dra": object.union(template(9, "ExactCount")._dra, {"version": "v1beta1"})})
	count(max_devices_per_request.deny) == 0 with input as {"objects": [obj]}
}
