# METADATA
# title: Driver changes go through an already-applied canary
# description: >-
#   A change to the pod template of a main DRA driver workload (images, args, env, volumes; node
#   placement, names and labels ignored) is denied unless a canary workload
#   (annotation dra-gitops.io/canary-for: <main workload>, same namespace) already runs exactly that
#   template: live and healthy in the cluster when cluster data is given, otherwise present with that
#   template in the base revision. Creating a driver for the first time is allowed. A canary that is
#   not limited to canary nodes (no nodeSelector, no node affinity) is a warning, and so is (with
#   cluster data) an unchanged canary DaemonSet that runs on no node: 0 pods desired, or no live Node
#   matches its nodeSelector, or its canary nodes are not Ready. (A changed one fails its stage at apply
#   time.) A change of the content of a ConfigMap or Secret a main driver's pods read is denied the same
#   way: a canary (reading it, or its own copy with that content) must have run it in the base. Driver
#   workloads are DaemonSets, Deployments (a driver's controller) and StatefulSets recognized by label,
#   plugin-directory mount, a driver name they carry, or `drivers:` of dra-gitops.yaml. A main driver
#   workload that can also run on its canary's nodes is a warning.
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

# `canary` is a canary of `main` running the same (normalised) pod template and reading the same config
# content (its own copy of the main driver's ConfigMaps counts when equal; a live object's is unknown).
runs_template_of(canary, main) if {
	canary._dra.role == "driver-canary"
	canary._dra.canary_for == main._dra.name
	canary._dra.namespace == main._dra.namespace
	canary._dra.driver_template == main._dra.driver_template
	same_config(canary, main)
}

same_config(canary, main) if object.get(canary._dra, "driver_config", null) == null

same_config(canary, main) if object.get(main._dra, "driver_config", null) == null

same_config(canary, main) if canary._dra.driver_config == main._dra.driver_config

# With cluster data the canary must also have run that config content: in the base revision (the
# cluster's objects carry no ConfigMap content), when the change is to config.
config_canary_applied(main) if {
	some canary in input.base_objects
	runs_template_of(canary, main)
	canary._dra.driver_config == main._dra.driver_config
	live_healthy_or_offline(canary)
}

live_healthy_or_offline(_) if offline

live_healthy_or_offline(canary) if {
	not offline
	some live in object.get(input.cluster, "objects", [])
	live._dra.ref == canary._dra.ref
	live._dra.driver_template == canary._dra.driver_template
	healthy(live)
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

# A ConfigMap or Secret a main driver reads changes its content: every driver pod would take the new
# content at once, so a canary (reading this ConfigMap or its own copy) must have run it first.
deny contains v if {
	some change in input.changes
	change.driver_change == true
	some main in object.get(change, "driver_workloads", [])
	not config_canary_applied(main)
	obj := changed_object(change)
	msg := sprintf(
		"%s changes the config driver %s reads, but no already-applied canary runs that content: %s",
		[change.ref, main._dra.ref, config_why_not(main)],
	)
	v := violation(obj, msg)
}

changed_object(change) := change.new if change.new != null else := change.old

config_why_not(main) := sprintf(
	"canary %s reads different content; give the canary (or its own copy of this config) the new content first, then promote it",
	[refs(canaries)],
) if {
	canaries := canaries_of(main)
	count(canaries) > 0
} else := sprintf(
	"it has no canary; add a workload annotated dra-gitops.io/canary-for: %s, limited to canary nodes, reading this content, and roll it out there first",
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

# --- a canary that runs nowhere (cluster data) ---------------------------------------------------

live_objects := object.get(input, ["cluster", "objects"], []) if not offline

live_objects := [] if offline

live_nodes := [n | some n in live_objects; n.kind == "Node"]

node_matches(node, selector) if {
	labels := object.get(node, ["metadata", "labels"], {})
	every key, value in selector {
		object.get(labels, key, null) == value
	}
}

selector_text(selector) := concat(",", sort([sprintf("%s=%s", [k, v]) | some k, v in selector]))

# The live DaemonSet runs nowhere: its controller, having seen its spec, desires 0 pods; or no live
# Node matches its nodeSelector.
runs_nowhere(live) if {
	object.get(live, ["status", "observedGeneration"], -1) >= object.get(live, ["metadata", "generation"], 0)
	object.get(live, ["status", "desiredNumberScheduled"], 1) == 0
}

runs_nowhere(live) if {
	selector := object.get(pod_spec(live), "nodeSelector", {})
	count(selector) > 0
	count([n | some n in live_nodes; node_matches(n, selector)]) == 0
}

nowhere_where(obj) := sprintf("%s %s not Ready", [concat(", ", names), be(names)]) if {
	names := unready_canary_nodes(obj)
} else := sprintf("nodeSelector %s matches no node", [selector_text(selector)]) if {
	selector := object.get(pod_spec(obj), "nodeSelector", {})
	count(selector) > 0
} else := "its node affinity matches no node"

label_hint(obj) := sprintf("kubectl label node <node> %s", [concat(" ", sort([sprintf("%s=%s", [k, v]) | some k, v in selector]))]) if {
	selector := object.get(pod_spec(obj), "nodeSelector", {})
	count(selector) > 0
} else := "kubectl label node <node> <key>=<value>"

warn contains v if {
	some obj in input.objects
	obj._dra.role == "driver-canary"
	obj.kind == "DaemonSet"
	some live in live_objects
	live.kind == "DaemonSet"
	live._dra.ref == obj._dra.ref
	live._dra.driver_template == obj._dra.driver_template # unchanged: a changed one fails at apply
	runs_nowhere(live)
	msg := sprintf(
		"%s: canary for %s runs on no node (%s, 0 pods desired), so it verifies nothing; %s",
		[obj._dra.ref, obj._dra.canary_for, nowhere_where(live), nowhere_fix(live)],
	)
	v := violation(obj, msg)
}

be(names) := "is" if count(names) == 1 else := "are"

node_ready(node) if {
	some condition in object.get(node, ["status", "conditions"], [])
	condition.type == "Ready"
	condition.status == "True"
}

# The canary nodes its nodeSelector matches, when every one of them is not Ready.
unready_canary_nodes(obj) := names if {
	selector := object.get(pod_spec(obj), "nodeSelector", {})
	count(selector) > 0
	matching := [n | some n in live_nodes; node_matches(n, selector)]
	count(matching) > 0
	every n in matching {
		not node_ready(n)
	}
	names := sort([n.metadata.name | some n in matching])
}

nowhere_fix(obj) := sprintf("bring %s back (kubectl describe node %s)", [concat(", ", names), names[0]]) if {
	names := unready_canary_nodes(obj)
} else := sprintf("label a canary node: %s", [label_hint(obj)])

# --- a main driver workload that can run on its canary's nodes --------------------------------------

node_terms(obj) := object.get(
	pod_spec(obj),
	["affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"],
	[],
)

# The labels that make a node a canary node: the canary's nodeSelector and its required In-expressions.
canary_labels(canary) := {[k, v] | some k, v in object.get(pod_spec(canary), "nodeSelector", {})} | {[e.key, val] |
	some term in node_terms(canary)
	some e in object.get(term, "matchExpressions", [])
	e.operator == "In"
	some val in object.get(e, "values", [])
}

excludes(main, key, value) if {
	selector := object.get(pod_spec(main), "nodeSelector", {})
	object.get(selector, key, value) != value
}

excludes(main, key, value) if {
	terms := node_terms(main)
	count(terms) > 0
	every term in terms {
		term_excludes(term, key, value)
	}
}

term_excludes(term, key, _) if {
	some e in object.get(term, "matchExpressions", [])
	e.key == key
	e.operator == "DoesNotExist"
}

term_excludes(term, key, value) if {
	some e in object.get(term, "matchExpressions", [])
	e.key == key
	e.operator == "NotIn"
	value in object.get(e, "values", [])
}

term_excludes(term, key, value) if {
	some e in object.get(term, "matchExpressions", [])
	e.key == key
	e.operator == "In"
	not value in object.get(e, "values", [])
}

excludes_any(main, labels) if {
	some [key, value] in labels
	excludes(main, key, value)
}

warn contains v if {
	some canary in input.objects
	canary._dra.role == "driver-canary"
	labels := canary_labels(canary)
	count(labels) > 0
	some main in input.objects
	main._dra.role == "driver"
	main.kind == canary.kind
	main._dra.name == canary._dra.canary_for
	main._dra.namespace == canary._dra.namespace
	not excludes_any(main, labels)
	shown := concat(", ", sort([sprintf("%s=%s", [k, val]) | some [k, val] in labels]))
	msg := sprintf(
		"%s can also run on the canary's nodes (%s), where it would race its canary %s; keep it off them (node affinity: DoesNotExist or NotIn on that label)",
		[main._dra.ref, shown, canary._dra.ref],
	)
	v := violation(main, msg)
}
