"""The external provisioner protocol: its client, its conformance check, and memtrial's own provisioners with the verb framework they share."""
