"""Several hosts: the hosts file, one SSH link per host, remote verbs and the fleet's
telemetry (see fleet.py for the API the console's fleet view is built on)."""
