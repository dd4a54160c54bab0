# METADATA
# title: A changed DeviceClass still serves the claims and workloads that use it
# description: >-
#   With cluster data, every DeviceClass whose CEL selectors the change edits is evaluated on every
#   published device (input.class_changes, reconciler/dra/class_change.py). Running pods keep their
#   devices, but every restart, reschedule or scale-up of the class's users is allocated through the
#   new selectors: a class that matches no device, or fails at run time on every device it reaches
#   (a CEL key the devices do not publish), is denied while live claims or workloads use it; a class
#   that matches fewer devices than its users hold is a warning. A class nobody uses is not judged.
#   Offline (no cluster data) the rule does nothing.
# custom:
#   id: class-change
#   severity: deny
package dra.class_change

rule_id := "class-change"

changes := object.get(input, "class_changes", [])

violation(c, msg) := {"rule": rule_id, "msg": msg, "ref": c.ref, "path": c.path, "line": c.line}

users(c) := sprintf("%d user(s): %s", [count(c.users), c.users_shown])

# No device matches, and at least one fails: the users' pods would stay Pending with SchedulerError.
deny contains v if {
	some c in changes
	count(c.users) > 0
	c.matched == 0
	c.failing > 0
	not c.unknown
	msg := sprintf(
		"%s: its selectors fail at run time on %d of %d published devices (%s: %s) and match none, yet %s; every restart or scale-up of them would stay Pending. %s",
		[c.ref, c.failing, c.devices, c.failing_devices, c.error, users(c), fix(c)],
	)
	v := violation(c, msg)
}

# Nothing fails and nothing matches: the class now selects no device at all.
deny contains v if {
	some c in changes
	count(c.users) > 0
	c.matched == 0
	c.failing == 0
	not c.unknown
	c.devices > 0
	msg := sprintf(
		"%s: its selectors match none of the %d published devices (%d before this change), yet %s; every restart or scale-up of them would stay Pending. Check the class selector",
		[c.ref, c.devices, c.matched_before, users(c)],
	)
	v := violation(c, msg)
}

warn contains v if {
	some c in changes
	count(c.users) > 0
	c.matched > 0
	c.matched < c.held
	msg := sprintf(
		"%s: its selectors match %d published device(s) (%d before this change) but its claims hold %d; %s: the users beyond %d would not get devices again after a restart. Check the class selector",
		[c.ref, c.matched, c.matched_before, c.held, users(c), c.matched],
	)
	v := violation(c, msg)
}

fix(c) := sprintf("Guard the key: %s", [c.guarded]) if c.guarded != null

fix(c) := "Check the class selector" if c.guarded == null
