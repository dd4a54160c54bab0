# METADATA
# title: Driver changes go through an already-applied canary
# description: >-
#   A change to the pod template of a main DRA driver workload (images, args, env, volumes; node
#   placement, names and labels ignored) is denied unless a canary workload
#   (annotation dra-gitops.io/canary-for: <main workload>, same namespace) already runs exactly that
#   template: live and healthy in the cluster when cluster data is given, otherwise present with that
#   template in the base revision. Creating a driver for the first time is allowed. A canary that is
#   not limited to canary nodes (no nodeSelector, no node affinity) is a warning.
# custom:
#   id: driver-canary
#   severity: deny
package dra.driver_canary

rule_id := "driver-canary"

violation(obj, msg) := {
	"rule": rule_id,
	"msg": msg,
	"ref": obj._dra.ref,
	"path": obj._dra.path,
	"line": obj._dra.line,
}

param(name, default_value) := object.get(object.get(input, "params", {}), name, default_value)

offline if object.get(input, "cluster", null) == null

# `canary` is a canary of `main` running the same (normalised) pod template.
runs_template_of(canary, main) if {
	canary._dra.role == "driver-canary"
	canary._dra.canary_for == main._dra.name
	canary._dra.namespace == main._dra.namespace
	canary._dra.driver_template == main._dra.driver_template
}

# Rollout state from the live object's status; no status means nothing to judge (treated as healthy).
healthy(obj) if object.get(obj, "status", null) == null

healthy(obj) if {
	obj.kind == "DaemonSet"
	desired := object.get(obj.status, "desiredNumberScheduled", 0)
	desired > 0
	object.get(obj.status, "numberReady", 0) >= desired
	object.get(obj.status, "updatedNumberScheduled", desired) >= desired
}

healthy(obj) if {
	obj.kind in {"Deployment", "StatefulSet"}
	wanted := object.get(obj.spec, "replicas", 1)
	wanted > 0
	object.get(obj.status, "readyReplicas", 0) >= wanted
	object.get(obj.status, "updatedReplicas", wanted) >= wanted
}

healthy(obj) if {
	object.get(obj, "status", null) != null
	not rollout_kind(obj.kind)
}

rollout_kind(kind) if kind in {"DaemonSet", "Deployment", "StatefulSet"}

canary_applied(main) if {
	not offline
	some canary in object.get(input.cluster, "objects", [])
	runs_template_of(canary, main)
	healthy(canary)
}

canary_applied(main) if {
	offline
	some canary in input.base_objects
	runs_template_of(canary, main)
}

refs(objects) := concat(", ", sort({o._dra.ref | some o in objects}))

live_unhealthy(main) := [c |
	not offline
	some c in object.get(input.cluster, "objects", [])
	runs_template_of(c, main)
	not healthy(c)
]

staged_now(main) := [c | some c in input.objects; runs_template_of(c, main)]

canaries_of(main) := [c |
	some c in input.objects
	c._dra.role == "driver-canary"
	c._dra.canary_for == main._dra.name
	c._dra.namespace == main._dra.namespace
]

why_not(main) := sprintf(
	"canary %s runs the new template but is not healthy in the cluster; wait for it to be ready and publish slices",
	[refs(unhealthy)],
) if {
	unhealthy := live_unhealthy(main)
	count(unhealthy) > 0
} else := sprintf(
	"canary %s gets the new template in this same change; apply and verify the canary first, then promote the template in a later commit",
	[refs(staged)],
) if {
	staged := staged_now(main)
	count(staged) > 0
} else := sprintf(
	"canary %s runs a different template; give the canary the new template first, then promote it",
	[refs(canaries)],
) if {
	canaries := canaries_of(main)
	count(canaries) > 0
} else := sprintf(
	"it has no canary; add a workload annotated dra-gitops.io/canary-for: %s, limited to canary nodes, and roll the new template out there first",
	[main._dra.name],
)

deny contains v if {
	some change in input.changes
	change.op == "update"
	change.driver_change == true
	new := change.new
	new._dra.role == "driver"
	new._dra.driver_template != change.old._dra.driver_template
	not canary_applied(new)
	msg := sprintf("%s changes the driver's pod template, but no already-applied canary runs it: %s", [new._dra.ref, why_not(new)])
	v := violation(new, msg)
}

pod_spec(obj) := object.get(obj, "spec", {}) if {
	obj.kind == "Pod"
} else := object.get(obj, ["spec", "jobTemplate", "spec", "template", "spec"], {}) if {
	obj.kind == "CronJob"
} else := object.get(obj, ["spec", "template", "spec"], {})

limited_to_canary_nodes(obj) if count(object.get(pod_spec(obj), "nodeSelector", {})) > 0

limited_to_canary_nodes(obj) if count(object.get(pod_spec(obj), ["affinity", "nodeAffinity"], {})) > 0

warn contains v if {
	param("canary_warn_unrestricted", true) == true
	some obj in input.objects
	obj._dra.role == "driver-canary"
	not limited_to_canary_nodes(obj)
	msg := sprintf(
		"%s: canary not limited to canary nodes (no nodeSelector or node affinity); it would run the new driver everywhere",
		[obj._dra.ref],
	)
	v := violation(obj, msg)
}
