"""The hidden `ddconsole` verb that runs a stored request: `bench.launch` starts it and
`cli/runner.py` registers it (apart, so registering loads nothing of the run machinery)."""

RUNNER_VERB = "run-request"
