package dra.driver_canary_test

import data.dra.driver_canary

# --- builders ---------------------------------------------------------------------------------

# A kubelet-plugin workload in gpu-system. `template` stands for the digest the model computes from
# the pod template (images, args, env, volumes).
workload(kind, name, role, canary_for, template, pod_extra) := {
	"apiVersion": "apps/v1",
	"kind": kind,
	"metadata": {"name": name, "namespace": "gpu-system"},
	"spec": {"template": {"spec": object.union({"containers": [{"name": "plugin", "image": template}]}, pod_extra)}},
	"_dra": {
		"ref": concat("/", [kind, "gpu-system", name]),
		"group": "apps",
		"version": "v1",
		"kind": kind,
		"namespace": "gpu-system",
		"name": name,
		"path": "10-driver/plugin.yaml",
		"line": 1,
		"stage": 1,
		"role": role,
		"device_classes": [],
		"claim_templates": [],
		"claims": [],
		"pod_claims": [],
		"container_claims": [],
		"driver": "gpu.example.com",
		"canary_for": canary_for,
		"driver_template": template,
		"admin_access": false,
	},
}

main(template) := workload("DaemonSet", "plugin", "driver", null, template, {})

canary_nodes := {"nodeSelector": {"dra-gitops.io/canary": "true"}}

canary(template) := workload("DaemonSet", "plugin-canary", "driver-canary", "plugin", template, canary_nodes)

with_status(obj, status) := object.union(obj, {"status": status})

with_ns(obj, ns) := object.union(obj, {"_dra": object.union(obj._dra, {"namespace": ns})})

update(old, new) := {"op": "update", "ref": new._dra.ref, "stage": 1, "old": old, "new": new, "driver_change": true}

doc(objects, base_objects, changes, cluster) := {
	"objects": objects,
	"base_objects": base_objects,
	"changes": changes,
	"cluster": cluster,
	"index": {},
	"base_index": {},
	"params": {},
}

live(objects) := {
	"version": "v1.34.1",
	"served": {"resource.k8s.io": ["v1"]},
	"deprecated": {"resource.k8s.io": []},
	"objects": objects,
	"index": {},
}

# Promote "v2" to the main workload, offline, with the given base and head canaries.
promote_offline(base_canaries, head_canaries) := result if {
	result := driver_canary.deny with input as doc(
		array.concat([main("v2")], head_canaries),
		array.concat([main("v1")], base_canaries),
		[update(main("v1"), main("v2"))],
		null,
	)
}

promote_live(live_objects) := result if {
	result := driver_canary.deny with input as doc(
		[main("v2"), canary("v2")],
		[main("v1"), canary("v2")],
		[update(main("v1"), main("v2"))],
		live(live_objects),
	)
}

denied_with(result, fragment) if {
	count(result) == 1
	some v in result
	v.rule == "driver-canary"
	v.ref == "DaemonSet/gpu-system/plugin"
	v.path == "10-driver/plugin.yaml"
	v.line == 1
	contains(v.msg, fragment)
}

# --- offline (PR check): base revision decides ------------------------------------------------

test_promotion_after_canary_in_base_allowed if {
	count(promote_offline([canary("v2")], [canary("v2")])) == 0
}

test_promotion_canary_removed_in_head_still_allowed if {
	# the base proves the canary ran the template; the head may retire it
	count(promote_offline([canary("v2")], [])) == 0
}

test_canary_changed_in_same_change_denied if {
	denied_with(promote_offline([canary("v1")], [canary("v2")]), "in this same change")
}

test_canary_created_in_same_change_denied if {
	denied_with(promote_offline([], [canary("v2")]), "in this same change")
}

test_canary_with_other_template_denied if {
	denied_with(promote_offline([canary("v1")], [canary("v1")]), "runs a different template")
}

test_no_canary_denied if {
	denied_with(promote_offline([], []), "it has no canary")
}

test_canary_in_other_namespace_denied if {
	other := with_ns(canary("v2"), "elsewhere")
	denied_with(promote_offline([other], [other]), "it has no canary")
}

test_canary_for_other_workload_denied if {
	other := workload("DaemonSet", "x-canary", "driver-canary", "other-plugin", "v2", canary_nodes)
	denied_with(promote_offline([other], [other]), "it has no canary")
}

# --- with a cluster: the live canary decides ----------------------------------------------------

ready_ds(obj) := with_status(obj, {"desiredNumberScheduled": 2, "numberReady": 2, "updatedNumberScheduled": 2})

test_live_healthy_canary_allowed if {
	count(promote_live([main("v1"), ready_ds(canary("v2"))])) == 0
}

test_live_canary_without_status_allowed if {
	count(promote_live([main("v1"), canary("v2")])) == 0
}

test_live_canary_not_ready_denied if {
	c := with_status(canary("v2"), {"desiredNumberScheduled": 2, "numberReady": 1, "updatedNumberScheduled": 2})
	denied_with(promote_live([main("v1"), c]), "not healthy")
}

test_live_canary_not_updated_denied if {
	c := with_status(canary("v2"), {"desiredNumberScheduled": 2, "numberReady": 2, "updatedNumberScheduled": 1})
	denied_with(promote_live([main("v1"), c]), "not healthy")
}

test_live_canary_on_no_node_denied if {
	c := with_status(canary("v2"), {"desiredNumberScheduled": 0, "numberReady": 0})
	denied_with(promote_live([main("v1"), c]), "not healthy")
}

test_live_canary_old_template_denied if {
	# in the base with the new template, but the cluster still runs the old one: not applied yet
	count(promote_live([main("v1"), ready_ds(canary("v1"))])) == 1
}

test_live_canary_missing_denied if {
	count(promote_live([main("v1")])) == 1
}

test_live_deployment_canary if {
	dep := workload("Deployment", "plugin-canary", "driver-canary", "plugin", "v2", canary_nodes)
	ready := object.union(dep, {"spec": object.union(dep.spec, {"replicas": 2}), "status": {"readyReplicas": 2, "updatedReplicas": 2}})
	count(promote_live([main("v1"), ready])) == 0
	not_ready := object.union(dep, {"status": {"readyReplicas": 0}})
	count(promote_live([main("v1"), not_ready])) == 1
}

# --- changes that are not promotions --------------------------------------------------------------

test_first_install_allowed if {
	change := {"op": "create", "ref": "DaemonSet/gpu-system/plugin", "stage": 1, "old": null, "new": main("v2"), "driver_change": true}
	result := driver_canary.deny with input as doc([main("v2")], [], [change], null)
	count(result) == 0
}

test_same_template_allowed if {
	# e.g. only labels or the nodeSelector changed: the digest is the same
	result := driver_canary.deny with input as doc([main("v1")], [main("v1")], [update(main("v1"), main("v1"))], null)
	count(result) == 0
}

test_not_a_driver_change_allowed if {
	change := object.union(update(main("v1"), main("v2")), {"driver_change": false})
	result := driver_canary.deny with input as doc([main("v2")], [main("v1")], [change], null)
	count(result) == 0
}

test_canary_update_itself_allowed if {
	result := driver_canary.deny with input as doc(
		[main("v1"), canary("v2")],
		[main("v1"), canary("v1")],
		[update(canary("v1"), canary("v2"))],
		null,
	)
	count(result) == 0
}

# --- canary placement (warn) ----------------------------------------------------------------------

warnings(objects, params) := result if {
	result := driver_canary.warn with input as object.union(doc(objects, [], [], null), {"params": params})
}

test_canary_with_node_selector_no_warning if {
	count(warnings([canary("v2")], {})) == 0
}

test_canary_with_node_affinity_no_warning if {
	affinity := {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
		"nodeSelectorTerms": [{"matchExpressions": [{"key": "dra-gitops.io/canary", "operator": "In", "values": ["true"]}]}],
	}}}}
	c := workload("DaemonSet", "plugin-canary", "driver-canary", "plugin", "v2", affinity)
	count(warnings([c], {})) == 0
}

test_unrestricted_canary_warns if {
	c := workload("DaemonSet", "plugin-canary", "driver-canary", "plugin", "v2", {})
	result := warnings([c], {})
	count(result) == 1
	some v in result
	contains(v.msg, "canary not limited to canary nodes")
}

test_empty_node_selector_warns if {
	c := workload("DaemonSet", "plugin-canary", "driver-canary", "plugin", "v2", {"nodeSelector": {}})
	count(warnings([c], {})) == 1
}

test_pod_affinity_only_warns if {
	c := workload("DaemonSet", "plugin-canary", "driver-canary", "plugin", "v2", {"affinity": {"podAffinity": {"x": 1}}})
	count(warnings([c], {})) == 1
}

test_unrestricted_canary_warning_can_be_disabled if {
	c := workload("DaemonSet", "plugin-canary", "driver-canary", "plugin", "v2", {})
	count(warnings([c], {"canary_warn_unrestricted": false})) == 0
}

test_pod_canary_placement if {
	pod := {
		"apiVersion": "v1",
		"kind": "Pod",
		"metadata": {"name": "plugin-canary", "namespace": "gpu-system"},
		"spec": {"nodeSelector": {"dra-gitops.io/canary": "true"}, "containers": []},
		"_dra": canary("v2")._dra,
	}
	count(warnings([pod], {})) == 0
	bare := object.remove(pod, ["spec"])
	count(warnings([bare], {})) == 1
}

test_main_driver_without_selector_no_warning if {
	count(warnings([main("v2")], {})) == 0
}

# --- a canary that runs nowhere (warn, cluster data) ----------------------------------------------

node(name, labels) := {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "_dra": {"ref": concat("/", ["Node", name])}}

canary_node := node("node-a", {"dra-gitops.io/canary": "true"})

plain_node := node("node-b", {})

nowhere_warnings(desired, live_objects) := [w |
	some w in driver_canary.warn with input as doc(desired, [], [], live(live_objects))
	contains(w.msg, "runs on no node")
]

observed(obj, desired) := object.union(
	object.union(obj, {"metadata": object.union(obj.metadata, {"generation": 2})}),
	{"status": {"observedGeneration": 2, "desiredNumberScheduled": desired}},
)

test_unchanged_canary_desiring_no_pod_warns if {
	result := nowhere_warnings([canary("v2")], [plain_node, observed(canary("v2"), 0)])
	count(result) == 1
	some w in result
	w.ref == "DaemonSet/gpu-system/plugin-canary"
	contains(w.msg, "nodeSelector dra-gitops.io/canary=true matches no node")
	contains(w.msg, "kubectl label node <node> dra-gitops.io/canary=true")
}

test_unchanged_canary_matching_no_live_node_warns if {
	count(nowhere_warnings([canary("v2")], [plain_node, canary("v2")])) == 1
}

test_canary_running_on_a_canary_node_no_warning if {
	count(nowhere_warnings([canary("v2")], [canary_node, plain_node, observed(canary("v2"), 1)])) == 0
}

test_changed_canary_desiring_no_pod_is_left_to_the_apply if {
	count(nowhere_warnings([canary("v3")], [plain_node, observed(canary("v2"), 0)])) == 0
}

test_canary_not_live_no_warning if {
	count(nowhere_warnings([canary("v2")], [plain_node])) == 0
}

test_affinity_canary_desiring_no_pod_warns_without_selector if {
	affinity := {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}}
	c := workload("DaemonSet", "plugin-canary", "driver-canary", "plugin", "v2", affinity)
	result := nowhere_warnings([c], [plain_node, observed(c, 0)])
	count(result) == 1
	some w in result
	contains(w.msg, "its node affinity matches no node")
	contains(w.msg, "kubectl label node <node> <key>=<value>")
}

test_offline_no_nowhere_warning if {
	result := [w |
		some w in driver_canary.warn with input as doc([canary("v2")], [], [], null)
		contains(w.msg, "runs on no node")
	]
	count(result) == 0
}

# --- a main driver workload that can run on its canary's nodes (warn) ------------------------------

off_canary_nodes := {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "dra-gitops.io/canary", "operator": "DoesNotExist"}]}]}}}}

test_main_that_can_run_on_canary_nodes_warns if {
	result := warnings([main("v1"), canary("v1")], {})
	count(result) == 1
	some w in result
	w.ref == "DaemonSet/gpu-system/plugin"
	contains(w.msg, "can also run on the canary's nodes (dra-gitops.io/canary=true)")
}

test_main_kept_off_canary_nodes_no_warning if {
	kept_off := workload("DaemonSet", "plugin", "driver", null, "v1", off_canary_nodes)
	count(warnings([kept_off, canary("v1")], {})) == 0
}

test_main_on_other_nodes_by_selector_no_warning if {
	elsewhere := workload("DaemonSet", "plugin", "driver", null, "v1", {"nodeSelector": {"dra-gitops.io/canary": "false"}})
	count(warnings([elsewhere, canary("v1")], {})) == 0
}

# --- a change of the config a main driver reads ------------------------------------------------------

with_config(obj, digest) := object.union(obj, {"_dra": object.union(obj._dra, {"driver_config": digest})})

config_map(mode) := {
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {"name": "mode", "namespace": "gpu-system"},
	"data": {"mode": mode},
	"_dra": {"ref": "ConfigMap/gpu-system/mode", "path": "10-driver/mode.yaml", "line": 1, "role": "other"},
}

config_change(base_canary) := result if {
	new_main := with_config(main("v1"), "individual")
	change := {
		"op": "update",
		"ref": "ConfigMap/gpu-system/mode",
		"stage": 4,
		"old": config_map("grouped"),
		"new": config_map("individual"),
		"driver_change": true,
		"driver_workloads": [new_main],
	}
	result := driver_canary.deny with input as doc(
		[new_main, config_map("individual"), base_canary],
		[with_config(main("v1"), "grouped"), base_canary],
		[change],
		null,
	)
}

test_config_change_without_the_canary_running_it_is_denied if {
	result := config_change(with_config(canary("v1"), "grouped"))
	count(result) == 1
	some d in result
	d.ref == "ConfigMap/gpu-system/mode"
	contains(d.msg, "changes the config driver DaemonSet/gpu-system/plugin reads")
	contains(d.msg, "reads different content")
}

test_config_change_the_canary_already_ran_passes if {
	count(config_change(with_config(canary("v1"), "individual"))) == 0
}

test_config_change_with_a_canary_on_another_template_is_denied if {
	count(config_change(with_config(canary("v0"), "individual"))) == 1
}

# --- a canary whose node is not Ready ---------------------------------------------------------------

with_ready(n, ready) := object.union(n, {"status": {"conditions": [{"type": "Ready", "status": ready}]}})

test_canary_whose_node_is_not_ready_says_so if {
	down := with_ready(node("node-2", {"dra-gitops.io/canary": "true"}), "False")
	result := nowhere_warnings([canary("v2")], [down, plain_node, observed(canary("v2"), 0)])
	count(result) == 1
	some w in result
	contains(w.msg, "runs on no node (node-2 is not Ready, 0 pods desired)")
	contains(w.msg, "bring node-2 back (kubectl describe node node-2)")
	not contains(w.msg, "label a canary node")
}

test_canary_with_a_ready_node_still_asks_for_a_label_when_nothing_matches if {
	up := with_ready(plain_node, "True")
	result := nowhere_warnings([canary("v2")], [up, observed(canary("v2"), 0)])
	some w in result
	contains(w.msg, "label a canary node")
}
