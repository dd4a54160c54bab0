# METADATA
# title: Device classes exist before the claims that request them
# description: >-
#   Every device class that a ResourceClaim or ResourceClaimTemplate requests (every alternative of a
#   prioritized list, every resource.k8s.io version; a v1alpha2 ResourceClass by resourceClassName) must
#   exist in the desired state or in the cluster, and the change must not apply the class in a later
#   stage than the claim (a dra-gitops.io/stage override) unless the class already exists. Extended
#   resources backed by DRA count too: deviceclass.resource.kubernetes.io/<class> needs the class, and a
#   class's extendedResourceName must not come later than the pods requesting it.
# custom:
#   id: class-before-template
#   severity: deny
package dra.class_before_template

rule_id := "class-before-template"

claim_roles := {"claim", "claim-template"}

violation(obj, msg) := {
	"rule": rule_id,
	"msg": msg,
	"ref": obj._dra.ref,
	"path": obj._dra.path,
	"line": obj._dra.line,
}

# The cluster's index when the check runs against a cluster, else an empty index.
cluster_index := idx if {
	input.cluster != null
	idx := object.get(input.cluster, "index", {})
} else := {}

# The classes of an index by name (an index's entries are object refs, never null or false): looked up
# directly in the rules below, since a function call per claim costs more than the lookup (10,000 objects).
desired_classes := object.get(input.index, "device_classes", {})

live_classes := object.get(cluster_index, "device_classes", {})

base_classes := object.get(object.get(input, "base_index", {}), "device_classes", {})

# Known after this change: in the desired state or already in the cluster.
known_class(name) if desired_classes[name]

known_class(name) if live_classes[name]

# Exists before this change is applied: live in the cluster or, offline, part of the base revision.
preexisting_class(name) if live_classes[name]

preexisting_class(name) if {
	object.get(input, "cluster", null) == null
	base_classes[name]
}

# v1alpha1/v1alpha2 claims name a ResourceClass, later versions a DeviceClass.
# Claims and claim templates: the objects every rule below reads.
claimants := [obj | some obj in input.objects; obj._dra.role in claim_roles]

class_kind(obj) := "ResourceClass" if {
	obj._dra.version in {"v1alpha1", "v1alpha2"}
} else := "DeviceClass"

deny contains v if {
	some obj in claimants
	some class in obj._dra.device_classes
	not desired_classes[class]
	not live_classes[class]
	msg := sprintf(
		"%s requests %s %s, which exists neither in the desired state nor in the cluster; add the class or fix the class name",
		[obj._dra.ref, class_kind(obj), class],
	)
	v := violation(obj, msg)
}

head_classes := [obj | some obj in input.objects; obj._dra.role == "device-class"]

# Latest stage at which the desired state applies each class (a name may appear more than once
# when several versions' objects share it). Built once so the check below stays linear.
# Python puts the stage of every class in the index (docs/policy-input.md); grouping the classes here
# would cost a pass over all classes per class.
class_stage := input.index.device_class_stages if {
	input.index.device_class_stages
} else := {name: max(stages) |
	some cls in head_classes
	name := cls._dra.name
	stages := [other._dra.stage | some other in head_classes; other._dra.name == name]
}

deny contains v if {
	some obj in claimants
	some class in obj._dra.device_classes
	stage := class_stage[class]
	stage > obj._dra.stage
	not preexisting_class(class)
	msg := sprintf(
		"%s requests %s %s, which this change applies in a later stage (%d) than the claim (%d); drop the dra-gitops.io/stage override so the class comes first",
		[obj._dra.ref, class_kind(obj), class, stage, obj._dra.stage],
	)
	v := violation(obj, msg)
}

# --- extended resources backed by DRA (DeviceClass spec.extendedResourceName, 1.34+) ------------------

alias_prefix := "deviceclass.resource.kubernetes.io/"

pod_makers := [obj | some obj in input.objects; obj._dra.role in {"workload", "driver", "driver-canary"}]

# `deviceclass.resource.kubernetes.io/<class>`: the implicit name of every DeviceClass.
deny contains v if {
	some obj in pod_makers
	some name in object.get(obj._dra, "extended_resources", [])
	startswith(name, alias_prefix)
	class := substring(name, count(alias_prefix), -1)
	not known_class(class)
	msg := sprintf(
		"%s requests extended resource %s of DeviceClass %s, which exists neither in the desired state nor in the cluster; add the class or fix the resource name",
		[obj._dra.ref, name, class],
	)
	v := violation(obj, msg)
}

# The class behind an extended resource name: its alias, or the class whose extendedResourceName it is.
backing_class(name) := substring(name, count(alias_prefix), -1) if {
	startswith(name, alias_prefix)
} else := object.get(input.index, ["extended_resources", name], null)

deny contains v if {
	some obj in pod_makers
	some name in object.get(obj._dra, "extended_resources", [])
	class := backing_class(name)
	class != null
	stage := class_stage[class]
	stage > obj._dra.stage
	not preexisting_class(class)
	msg := sprintf(
		"%s requests extended resource %s of DeviceClass %s, which this change applies in a later stage (%d) than the workload (%d); drop the dra-gitops.io/stage override so the class comes first",
		[obj._dra.ref, name, class, stage, obj._dra.stage],
	)
	v := violation(obj, msg)
}
