"""Tools that drive a node from outside, off the request path: the load generator of `edgeroute
bench load` (workload, probe, report, the OpenAI SDK's retry rule) and the fault run of `edgeroute
bench faults`. Only the command line imports this package (an import-linter contract holds it)."""
