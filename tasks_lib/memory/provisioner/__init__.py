"""The external provisioner protocol: its client, its conformance check and memtrial's own provisioners."""
