# METADATA
# title: Pod claim references are consistent and resolvable
# description: >-
#   For every workload that uses DRA claims (Pods and pod templates of Deployments, StatefulSets,
#   DaemonSets, Jobs, ...): every claim a container uses is declared in spec.resourceClaims, every
#   pod-level entry sets exactly one of resourceClaimName / resourceClaimTemplateName, and every
#   referenced ResourceClaimTemplate and ResourceClaim exists in the desired state or in the cluster.
#   A pod-level entry that no container uses is a warning.
# custom:
#   id: claim-refs
#   severity: deny
package dra.claim_refs

rule_id := "claim-refs"

violation(obj, msg) := {
	"rule": rule_id,
	"msg": msg,
	"ref": obj._dra.ref,
	"path": obj._dra.path,
	"line": obj._dra.line,
}

cluster_index := idx if {
	input.cluster != null
	idx := object.get(input.cluster, "index", {})
} else := {}

# The templates and claims of the desired state and the cluster by "ns/name" (an index's entries are
# object refs, never null or false): looked up directly below, cheaper than a function call per workload.
desired_templates := object.get(input.index, "claim_templates", {})

live_templates := object.get(cluster_index, "claim_templates", {})

desired_claims := object.get(input.index, "claims", {})

live_claims := object.get(cluster_index, "claims", {})

# The objects with a pod spec: the only ones with pod or container claims (every rule below reads only these).
workloads := [obj | some obj in input.objects; obj._dra.role in {"workload", "driver", "driver-canary"}]

pod_claims(obj) := object.get(obj._dra, "pod_claims", [])

container_claims(obj) := object.get(obj._dra, "container_claims", [])

declared(obj, name) if {
	some pc in pod_claims(obj)
	pc.name == name
}

used_by_container(obj, name) if {
	some cc in container_claims(obj)
	cc.name == name
}

is_set(entry, field) if {
	value := object.get(entry, field, null)
	value != null
	value != ""
}

# Container claims must name a pod-level entry (the API server rejects the pod otherwise).
deny contains v if {
	some obj in workloads
	some cc in container_claims(obj)
	not declared(obj, cc.name)
	msg := sprintf(
		"%s: container %s uses claim %s, but spec.resourceClaims has no entry with that name",
		[obj._dra.ref, cc.container, cc.name],
	)
	v := violation(obj, msg)
}

deny contains v if {
	some obj in workloads
	some pc in pod_claims(obj)
	is_set(pc, "claim")
	is_set(pc, "template")
	msg := sprintf(
		"%s: pod claim %s sets both resourceClaimName and resourceClaimTemplateName; set exactly one",
		[obj._dra.ref, pc.name],
	)
	v := violation(obj, msg)
}

deny contains v if {
	some obj in workloads
	some pc in pod_claims(obj)
	not is_set(pc, "claim")
	not is_set(pc, "template")
	msg := sprintf(
		"%s: pod claim %s sets neither resourceClaimName nor resourceClaimTemplateName; set exactly one",
		[obj._dra.ref, pc.name],
	)
	v := violation(obj, msg)
}

deny contains v if {
	some obj in workloads
	some key in object.get(obj._dra, "claim_templates", [])
	not desired_templates[key]
	not live_templates[key]
	msg := sprintf(
		"%s uses ResourceClaimTemplate %s, which exists neither in the desired state nor in the cluster",
		[obj._dra.ref, key],
	)
	v := violation(obj, msg)
}

deny contains v if {
	some obj in workloads
	some key in object.get(obj._dra, "claims", [])
	not desired_claims[key]
	not live_claims[key]
	msg := sprintf(
		"%s uses ResourceClaim %s, which exists neither in the desired state nor in the cluster",
		[obj._dra.ref, key],
	)
	v := violation(obj, msg)
}

# An entry no container uses still gets devices allocated and reserved, but no container sees them.
warn contains v if {
	some obj in workloads
	some pc in pod_claims(obj)
	not used_by_container(obj, pc.name)
	msg := sprintf(
		"%s: pod claim %s is used by no container; its devices are allocated and reserved but no container gets them",
		[obj._dra.ref, pc.name],
	)
	v := violation(obj, msg)
}
