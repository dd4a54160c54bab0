package dra.driver_rollout_test

import data.dra.driver_rollout

# --- builders ---------------------------------------------------------------------------------

rollout(drain) := {"waves": ["1", "50%", "100%"], "soakSeconds": 120, "drainDevices": drain, "maxFailedNodes": 0}

daemonset(strategy, plan, role) := {
	"apiVersion": "apps/v1",
	"kind": "DaemonSet",
	"metadata": {"name": "gpu-plugin", "namespace": "gpu"},
	"spec": spec_of(strategy),
	"_dra": dra_of(plan, role),
}

spec_of(null) := {"template": {}}

spec_of(strategy) := {"updateStrategy": {"type": strategy}, "template": {}} if strategy != null

dra_of(null, role) := {
	"ref": "DaemonSet/gpu/gpu-plugin",
	"kind": "DaemonSet",
	"path": "drivers/gpu.yaml",
	"line": 3,
	"role": role,
	"driver": "gpu.example.com",
}

dra_of(plan, role) := object.union(dra_of(null, role), {"rollout": plan}) if plan != null

cluster(dra_kinds, unavailable) := {
	"version": "v1.36.2",
	"served": {"resource.k8s.io": ["v1", "v1beta2"]},
	"kinds": {"": {"Pod": ["v1"]}, "resource.k8s.io": dra_kinds},
	"unavailable": unavailable,
	"objects": [],
}

with_taint_rules := {"DeviceClass": ["v1"], "ResourceSlice": ["v1"], "DeviceTaintRule": ["v1beta2"]}

without_taint_rules := {"DeviceClass": ["v1"], "ResourceSlice": ["v1"]}

denials(objects, cluster_doc) := result if {
	result := driver_rollout.deny with input as {"objects": objects, "cluster": cluster_doc}
}

# --- updateStrategy ---------------------------------------------------------------------------

test_no_strategy_or_ondelete_passes if {
	count(denials([daemonset(null, rollout(false), "driver")], null)) == 0
	count(denials([daemonset("OnDelete", rollout(false), "driver")], null)) == 0
}

test_rolling_update_with_a_rollout_is_denied_at_the_daemonset if {
	found := denials([daemonset("RollingUpdate", rollout(false), "driver")], null)
	count(found) == 1
	some v in found
	v.rule == "driver-rollout"
	v.ref == "DaemonSet/gpu/gpu-plugin"
	v.path == "drivers/gpu.yaml"
	v.line == 3
	contains(v.msg, "sets updateStrategy RollingUpdate")
	contains(v.msg, "driver gpu.example.com")
}

test_without_a_rollout_any_strategy_passes if {
	count(denials([daemonset("RollingUpdate", null, "driver")], null)) == 0
}

test_a_canary_is_not_judged if {
	count(denials([daemonset("RollingUpdate", rollout(true), "driver-canary")], cluster(without_taint_rules, []))) == 0
}

# --- drainDevices and DeviceTaintRule ---------------------------------------------------------

test_drain_without_device_taint_rules_is_denied_with_cluster_data if {
	found := denials([daemonset(null, rollout(true), "driver")], cluster(without_taint_rules, []))
	count(found) == 1
	some v in found
	contains(v.msg, "serves no DeviceTaintRule")
	contains(v.msg, "v1.36.2")
}

test_drain_with_device_taint_rules_served_passes if {
	count(denials([daemonset(null, rollout(true), "driver")], cluster(with_taint_rules, []))) == 0
}

test_no_drain_needs_no_device_taint_rules if {
	count(denials([daemonset(null, rollout(false), "driver")], cluster(without_taint_rules, []))) == 0
}

test_drain_is_not_judged_offline_or_with_resource_discovery_unread if {
	count(denials([daemonset(null, rollout(true), "driver")], null)) == 0
	unread := cluster(without_taint_rules, ["resource.k8s.io/v1beta2"])
	count(denials([daemonset(null, rollout(true), "driver")], unread)) == 0
}

test_both_findings_on_one_daemonset if {
	count(denials([daemonset("RollingUpdate", rollout(true), "driver")], cluster(without_taint_rules, []))) == 2
}
