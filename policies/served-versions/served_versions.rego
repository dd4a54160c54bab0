# METADATA
# title: Manifests use resource.k8s.io versions the cluster serves
# description: >-
#   With cluster data: an object of group resource.k8s.io whose version the cluster does not serve is
#   denied; a served but deprecated version is a warning. Offline: v1alpha* and v1beta1 are warned as
#   not served by default on current clusters, v1beta2 as superseded by v1; v1 passes.
# custom:
#   id: served-versions
#   severity: deny
package dra.served_versions

rule_id := "served-versions"

group := "resource.k8s.io"

violation(obj, msg) := {
	"rule": rule_id,
	"msg": msg,
	"ref": obj._dra.ref,
	"path": obj._dra.path,
	"line": obj._dra.line,
}

param(name, default_value) := object.get(object.get(input, "params", {}), name, default_value)

online if object.get(input, "cluster", null) != null

dra_objects contains obj if {
	some obj in input.objects
	obj._dra.group == group
}

served := object.get(input.cluster, ["served", group], []) if online

deprecated := object.get(input.cluster, ["deprecated", group], []) if online

is_served(version) if version in served

is_deprecated(version) if version in deprecated

cluster_version := object.get(input.cluster, "version", "unknown") if online

# --- with cluster data -----------------------------------------------------------------------------

deny contains v if {
	online
	count(served) == 0
	some obj in dra_objects
	msg := sprintf(
		"%s uses %s/%s, but the cluster (%s) serves no %s version: DRA is not enabled there",
		[obj._dra.ref, group, obj._dra.version, cluster_version, group],
	)
	v := violation(obj, msg)
}

deny contains v if {
	online
	count(served) > 0
	some obj in dra_objects
	not is_served(obj._dra.version)
	msg := sprintf(
		"%s uses %s/%s, which the cluster (%s) does not serve; served: %s",
		[obj._dra.ref, group, obj._dra.version, cluster_version, concat(", ", served)],
	)
	v := violation(obj, msg)
}

warn contains v if {
	online
	param("deprecated_versions_warn", true) == true
	some obj in dra_objects
	is_served(obj._dra.version)
	is_deprecated(obj._dra.version)
	msg := sprintf(
		"%s uses %s/%s, which the cluster (%s) marks deprecated; move to v1",
		[obj._dra.ref, group, obj._dra.version, cluster_version],
	)
	v := violation(obj, msg)
}

# --- offline ---------------------------------------------------------------------------------------

off_by_default(version) if startswith(version, "v1alpha")

off_by_default(version) if version == "v1beta1"

warn contains v if {
	not online
	some obj in dra_objects
	off_by_default(obj._dra.version)
	msg := sprintf(
		"%s uses %s/%s, which is not served by default on current clusters (1.34+ serve v1 by default); use v1",
		[obj._dra.ref, group, obj._dra.version],
	)
	v := violation(obj, msg)
}

warn contains v if {
	not online
	param("deprecated_versions_warn", true) == true
	some obj in dra_objects
	obj._dra.version == "v1beta2"
	msg := sprintf(
		"%s uses %s/v1beta2, which is superseded by v1 (served by default since 1.34), off by default and deprecated (removal planned for 1.39); use v1",
		[obj._dra.ref, group],
	)
	v := violation(obj, msg)
}
