package dra.class_change_test

import data.dra.class_change

change(extra) := object.union(
	{
		"class": "gpu.example.com",
		"ref": "DeviceClass/gpu.example.com",
		"path": "classes/gpu.yaml",
		"line": 1,
		"devices": 8,
		"matched": 8,
		"matched_before": 8,
		"failing": 0,
		"failing_devices": "",
		"error": null,
		"guarded": null,
		"unknown": false,
		"users": ["Deployment/ml/trainer", "ResourceClaim/ml/shared"],
		"users_shown": "Deployment/ml/trainer, ResourceClaim/ml/shared",
		"held": 3,
	},
	extra,
)

test_a_selector_failing_on_every_device_is_denied_naming_the_users if {
	c := change({"matched": 0, "failing": 8, "failing_devices": "gpu.example.com/node-1/gpu-0", "error": "class gpu.example.com: selector #0: CEL runtime error: no such key: modle", "guarded": "\"modle\" in device.attributes[\"gpu.example.com\"] && (x)"})
	denials := class_change.deny with input as {"class_changes": [c]}
	count(denials) == 1
	some d in denials
	contains(d.msg, "fail at run time on 8 of 8")
	contains(d.msg, "Deployment/ml/trainer, ResourceClaim/ml/shared")
	contains(d.msg, "Guard the key")
}

test_a_selector_matching_nothing_is_denied_pointing_at_the_selector if {
	c := change({"matched": 0})
	denials := class_change.deny with input as {"class_changes": [c]}
	count(denials) == 1
	some d in denials
	contains(d.msg, "match none of the 8 published devices (8 before this change)")
	endswith(d.msg, "Check the class selector")
}

test_fewer_devices_than_the_users_hold_is_a_warning if {
	c := change({"matched": 2})
	count(class_change.deny) == 0 with input as {"class_changes": [c]}
	warnings := class_change.warn with input as {"class_changes": [c]}
	count(warnings) == 1
	some w in warnings
	contains(w.msg, "match 2 published device(s) (8 before this change) but its claims hold 3")
}

test_a_class_nobody_uses_is_not_judged if {
	c := change({"matched": 0, "users": [], "users_shown": ""})
	count(class_change.deny) == 0 with input as {"class_changes": [c]}
}

test_unknown_answers_never_deny if {
	c := change({"matched": 0, "unknown": true})
	count(class_change.deny) == 0 with input as {"class_changes": [c]}
}

test_offline_nothing_happens if {
	count(class_change.deny) == 0 with input as {}
	count(class_change.warn) == 0 with input as {}
}
