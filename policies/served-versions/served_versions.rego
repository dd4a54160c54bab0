# METADATA
# title: Manifests use API versions the cluster serves for their kind
# description: >-
#   Every object is judged by its kind and version, not by its group version alone (resource.k8s.io/v1
#   has no DeviceTaintRule on 1.36). With cluster data: an object whose kind the cluster's discovery does
#   not list in its version is denied, naming the versions that serve the kind (a CRD of the change
#   counts as served); a served but deprecated resource.k8s.io version is a warning. Offline: judged
#   against the release of params.kubernetes_version (default 1.36): a version that release does not
#   have, or serves only when enabled, is a warning naming the version to use. Kinds neither the cluster,
#   the release table nor a CRD of the change knows are not judged offline.
# custom:
#   id: served-versions
#   severity: deny
package dra.served_versions

rule_id := "served-versions"

dra_group := "resource.k8s.io"

violation(obj, msg) := {
	"rule": rule_id,
	"msg": msg,
	"ref": obj._dra.ref,
	"path": obj._dra.path,
	"line": obj._dra.line,
}

param(name, default_value) := object.get(object.get(input, "params", {}), name, default_value)

online if object.get(input, "cluster", null) != null

# "apps/v1", or "v1" for the core group
gv(group, version) := version if group == ""

gv(group, version) := concat("/", [group, version]) if group != ""

gvs(group, versions) := concat(", ", [gv(group, v) | some v in versions])

group_name(group) := "core" if group == ""

group_name(group) := group if group != ""

# versions a CustomResourceDefinition of this change serves its kind in (null: no such CRD)
crd(obj) := object.get(input, ["index", "crds", obj._dra.group, obj._dra.kind], null)

crd_versions(obj) := object.get(crd(obj), "versions", []) if crd(obj) != null

crd_versions(obj) := [] if crd(obj) == null

# --- with cluster data -----------------------------------------------------------------------------

cluster_version := object.get(input.cluster, "version", "unknown") if online

served_groups := object.get(input.cluster, "served", {}) if online

group_versions(group) := object.get(served_groups, group, [])

cluster_kinds := object.get(input.cluster, "kinds", {}) if online

# discovery by kind is there (older inputs only had the resource.k8s.io versions)
by_kind if {
	online
	count(cluster_kinds) > 0
}

# a group with a version discovery could not read: its kinds are unknown, not unserved
unavailable_group(group) if {
	some name in object.get(input.cluster, "unavailable", [])
	parts := split(name, "/")
	count(parts) == 2
	parts[0] == group
}

unavailable_group("") if {
	some name in object.get(input.cluster, "unavailable", [])
	not contains(name, "/")
}

cluster_versions(obj) := object.get(cluster_kinds, [obj._dra.group, obj._dra.kind], [])

kind_versions(obj) := array.concat(
	cluster_versions(obj),
	[v | some v in crd_versions(obj); not v in cluster_versions(obj)],
)

dra_off(obj) if {
	obj._dra.group == dra_group
	count(group_versions(dra_group)) == 0
}

deny contains v if {
	online
	some obj in input.objects
	dra_off(obj)
	msg := sprintf(
		"%s uses %s/%s, but the cluster (%s) serves no %s version: DRA is not enabled there",
		[obj._dra.ref, dra_group, obj._dra.version, cluster_version, dra_group],
	)
	v := violation(obj, msg)
}

instead(obj) := msg if {
	versions := kind_versions(obj)
	count(versions) > 0
	msg := sprintf(
		"use %s for %s (served: %s)",
		[gv(obj._dra.group, versions[0]), obj._dra.kind, gvs(obj._dra.group, versions)],
	)
}

instead(obj) := msg if {
	count(kind_versions(obj)) == 0
	count(group_versions(obj._dra.group)) > 0
	msg := sprintf(
		"no version the cluster serves has %s (%s: %s)",
		[obj._dra.kind, group_name(obj._dra.group), concat(", ", group_versions(obj._dra.group))],
	)
}

instead(obj) := msg if {
	count(kind_versions(obj)) == 0
	count(group_versions(obj._dra.group)) == 0
	msg := sprintf(
		"no version of the cluster serves %s: it serves no %s version",
		[obj._dra.kind, group_name(obj._dra.group)],
	)
}

# one pass over the objects; the messages are built for the few it keeps
unserved_kinds contains [group, kind, version] if {
	by_kind
	some [group, kind, version] in used_kinds
	not version in object.get(cluster_kinds, [group, kind], [])
	not version in object.get(input, ["index", "crds", group, kind, "versions"], [])
	not dra_off({"_dra": {"group": group}})
	not unavailable_group(group)
}

unserved contains obj if {
	some [group, kind, version] in unserved_kinds
	some obj in input.objects
	obj._dra.kind == kind
	obj._dra.group == group
	obj._dra.version == version
}

deny contains v if {
	some obj in unserved
	msg := sprintf(
		"%s uses %s, which the cluster (%s) does not serve for %s; %s",
		[obj._dra.ref, gv(obj._dra.group, obj._dra.version), cluster_version, obj._dra.kind, instead(obj)],
	)
	v := violation(obj, msg)
}

# Without discovery by kind: resource.k8s.io objects by their group's versions.
deny contains v if {
	online
	not by_kind
	some obj in input.objects
	obj._dra.group == dra_group
	not dra_off(obj)
	not obj._dra.version in group_versions(dra_group)
	msg := sprintf(
		"%s uses %s/%s, which the cluster (%s) does not serve; served: %s",
		[obj._dra.ref, dra_group, obj._dra.version, cluster_version, concat(", ", group_versions(dra_group))],
	)
	v := violation(obj, msg)
}

deprecated := object.get(input.cluster, ["deprecated", dra_group], []) if online

# the version to move a deprecated object to: the most preferred one serving its kind
move_to(obj) := gv(dra_group, versions[0]) if {
	by_kind
	versions := kind_versions(obj)
	count(versions) > 0
	versions[0] != obj._dra.version
}

move_to(obj) := "v1" if not by_kind

warn contains v if {
	online
	param("deprecated_versions_warn", true) == true
	some obj in input.objects
	obj._dra.group == dra_group
	obj._dra.version in group_versions(dra_group)
	obj._dra.version in deprecated
	target := move_to(obj)
	msg := sprintf(
		"%s uses %s/%s, which the cluster (%s) marks deprecated; use %s for %s",
		[obj._dra.ref, dra_group, obj._dra.version, cluster_version, target, obj._dra.kind],
	)
	v := violation(obj, msg)
}

# --- offline ---------------------------------------------------------------------------------------

release := object.get(input, "release", null)

release_name := sprintf("Kubernetes %s", [release.version]) if release != null

# how the release serves the object's kind (undefined: the table does not know the kind)
facts(obj) := f if {
	release != null
	f := object.get(release, ["kinds", obj._dra.group, obj._dra.kind], null)
	f != null
}

range_of(f, version) := object.get(f.ranges, version, "in no release from 1.26 on")

runtime_config(group, version) := sprintf("api/%s", [version]) if group == ""

runtime_config(group, version) := gv(group, version) if group != ""

# what to use instead, from the release's table
advice(obj, f) := sprintf("use %s for %s (served by default)", [gv(obj._dra.group, f["default"][0]), obj._dra.kind]) if {
	count(f["default"]) > 0
}

advice(obj, f) := concat("; ", array.concat([none_by_default], array.concat(when_enabled, later))) if {
	count(f["default"]) == 0
	none_by_default := sprintf("no version of %s is served by default on %s", [obj._dra.kind, release.version])
	others := [v | some v in f.opt_in; v != obj._dra.version]
	when_enabled := [sprintf("%s serves it in %s, only when enabled", [release.version, gvs(obj._dra.group, others)]) | count(others) > 0]
	next := object.get(f, "next_default", null)
	later := [sprintf("%s serves %s by default", [next.release, gvs(obj._dra.group, next.versions)]) | next != null]
}

deprecation(obj, f) := sprintf(", %s", [f.deprecated[obj._dra.version]]) if f.deprecated[obj._dra.version]

deprecation(obj, f) := "" if not f.deprecated[obj._dra.version]

# objects whose version the release does not serve by default: one pass, the rules below read these
# The (group, kind, version) triples of the change, judged once each: a few, where objects are thousands.
used_kinds contains [obj._dra.group, obj._dra.kind, obj._dra.version] if some obj in input.objects

suspect_kinds contains [group, kind, version] if {
	not online
	release != null
	some [group, kind, version] in used_kinds
	f := object.get(release, ["kinds", group, kind], null)
	f != null
	not f.versions[version] == "default"
}

offline_suspects contains [obj, f] if {
	some [group, kind, version] in suspect_kinds
	some obj in input.objects
	obj._dra.kind == kind
	obj._dra.group == group
	obj._dra.version == version
	f := facts(obj)
	crd(obj) == null
}

warn contains v if {
	some [obj, f] in offline_suspects
	f.versions[obj._dra.version] == "opt-in"
	msg := sprintf(
		"%s uses %s, which %s serves only when enabled (kube-apiserver --runtime-config=%s=true)%s; %s",
		[
			obj._dra.ref, gv(obj._dra.group, obj._dra.version), release_name,
			runtime_config(obj._dra.group, obj._dra.version), deprecation(obj, f), advice(obj, f),
		],
	)
	v := violation(obj, msg)
}

warn contains v if {
	some [obj, f] in offline_suspects
	count(f.versions) > 0
	not f.versions[obj._dra.version]
	msg := sprintf(
		"%s uses %s, which %s does not have for %s (%s: %s); %s",
		[
			obj._dra.ref, gv(obj._dra.group, obj._dra.version), release_name, obj._dra.kind,
			gv(obj._dra.group, obj._dra.version), range_of(f, obj._dra.version), advice(obj, f),
		],
	)
	v := violation(obj, msg)
}

warn contains v if {
	some [obj, f] in offline_suspects
	count(f.versions) == 0
	msg := sprintf(
		"%s uses %s, but %s serves no version of %s (%s: %s)",
		[
			obj._dra.ref, gv(obj._dra.group, obj._dra.version), release_name, obj._dra.kind,
			gv(obj._dra.group, obj._dra.version), range_of(f, obj._dra.version),
		],
	)
	v := violation(obj, msg)
}

# A kind whose CustomResourceDefinition is in the change: that CRD says which versions serve it.
warn contains v if {
	not online
	count(object.get(input, ["index", "crds"], {})) > 0
	some obj in input.objects
	crd(obj) != null
	not obj._dra.version in crd_versions(obj)
	served := crd_versions(obj)
	hint := sprintf("it serves %s", [gvs(obj._dra.group, served)])
	msg := sprintf(
		"%s uses %s, which its CustomResourceDefinition %s does not serve; %s",
		[obj._dra.ref, gv(obj._dra.group, obj._dra.version), crd(obj).ref, crd_hint(served, hint)],
	)
	v := violation(obj, msg)
}

crd_hint(served, hint) := hint if count(served) > 0

crd_hint(served, _) := "it serves no version" if count(served) == 0
