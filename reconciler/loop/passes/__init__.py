"""The pass: follow, apply, verify, roll back; requested deliveries, rehearsals, the kept revision."""
