"""The state store and its records: the state ConfigMap, history records, operator requests, status views."""
