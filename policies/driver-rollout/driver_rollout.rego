# METADATA
# title: Drivers upgraded in waves are delivered for waves
# description: >-
#   A main driver DaemonSet with a `rollout` (its driver's `rollout` in dra-gitops.yaml, or its annotation
#   dra-gitops.io/rollout: `_dra.rollout`) is upgraded node by node by the reconciler, which delivers it
#   with updateStrategy OnDelete: a manifest that sets another strategy is denied (the DaemonSet's own
#   rolling update would replace every node's plugin without waiting for a wave). With cluster data,
#   `drainDevices: true` is denied when the cluster serves no DeviceTaintRule (DRADeviceTaintRules off):
#   the devices could not be drained, and a drain is never skipped silently. A cluster whose
#   resource.k8s.io discovery could not be read is not judged.
# custom:
#   id: driver-rollout
#   severity: deny
package dra.driver_rollout

rule_id := "driver-rollout"

dra_group := "resource.k8s.io"

violation(obj, msg) := {
	"rule": rule_id,
	"msg": msg,
	"ref": obj._dra.ref,
	"path": obj._dra.path,
	"line": obj._dra.line,
}

waved contains obj if {
	some obj in input.objects
	obj._dra.role == "driver"
	obj._dra.kind == "DaemonSet"
	object.get(obj._dra, "rollout", null) != null
}

deny contains v if {
	some obj in waved
	strategy := object.get(obj, ["spec", "updateStrategy", "type"], "OnDelete")
	strategy != "OnDelete"
	msg := sprintf(
		"%s is upgraded in waves (the rollout of driver %s), but sets updateStrategy %s: its own rolling update would replace every node's plugin without waiting for a wave; remove updateStrategy (the reconciler delivers OnDelete) or set it to OnDelete",
		[obj._dra.ref, obj._dra.driver, strategy],
	)
	v := violation(obj, msg)
}

# with cluster data whose discovery lists kinds, and read resource.k8s.io whole
judged if {
	input.cluster != null
	count(object.get(input.cluster, "kinds", {})) > 0
	not unread_dra
}

unread_dra if {
	input.cluster != null
	some name in object.get(input.cluster, "unavailable", [])
	startswith(name, concat("", [dra_group, "/"]))
}

taint_rule_versions := object.get(input.cluster, ["kinds", dra_group, "DeviceTaintRule"], []) if judged

deny contains v if {
	judged
	count(taint_rule_versions) == 0
	some obj in waved
	obj._dra.rollout.drainDevices == true
	msg := sprintf(
		"%s drains its devices while its plugin is replaced (drainDevices of driver %s), but the cluster (%s) serves no DeviceTaintRule: turn on the DRADeviceTaintRules feature gate and resource.k8s.io/v1beta2 (1.36; v1 from 1.37), or set drainDevices: false",
		[obj._dra.ref, obj._dra.driver, object.get(input.cluster, "version", "unknown")],
	)
	v := violation(obj, msg)
}
