# METADATA
# title: adminAccess only in namespaces labelled for it
# description: >-
#   A ResourceClaim or ResourceClaimTemplate whose request asks for adminAccess must live in a namespace
#   labelled resource.kubernetes.io/admin-access "true" (Kubernetes 1.34+; the key is the param
#   admin_namespace_label). Labels come from the namespace in the desired state, else from the
#   cluster. A namespace found in neither is denied because the label cannot be verified.
# custom:
#   id: admin-access
#   severity: deny
package dra.admin_access

rule_id := "admin-access"

violation(obj, msg) := {
	"rule": rule_id,
	"msg": msg,
	"ref": obj._dra.ref,
	"path": obj._dra.path,
	"line": obj._dra.line,
}

param(name, default_value) := object.get(object.get(input, "params", {}), name, default_value)

label_key := param("admin_namespace_label", "resource.kubernetes.io/admin-access")

cluster_index := idx if {
	input.cluster != null
	idx := object.get(input.cluster, "index", {})
} else := {}

# The namespace as the change leaves it: the desired state wins over the cluster.
namespace_entry(ns) := entry if {
	entry := object.get(input.index, ["namespaces", ns], null)
	entry != null
} else := entry if {
	entry := object.get(cluster_index, ["namespaces", ns], null)
	entry != null
}

admin_claims contains obj if {
	some obj in input.objects
	obj._dra.role in {"claim", "claim-template"}
	obj._dra.admin_access == true
}

deny contains v if {
	some obj in admin_claims
	entry := namespace_entry(obj._dra.namespace)
	object.get(entry, ["labels", label_key], "") != "true"
	msg := sprintf(
		"%s requests adminAccess, but namespace %s is not labelled %s: \"true\"; the API server rejects it",
		[obj._dra.ref, obj._dra.namespace, label_key],
	)
	v := violation(obj, msg)
}

deny contains v if {
	some obj in admin_claims
	not namespace_entry(obj._dra.namespace)
	msg := sprintf(
		"%s requests adminAccess, but namespace %s is neither in the desired state nor in the cluster, so its %s label can't be verified",
		[obj._dra.ref, obj._dra.namespace, label_key],
	)
	v := violation(obj, msg)
}
