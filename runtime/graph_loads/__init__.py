"""A job's Neptune bulk load: start it once per run (after the edge endpoint check), poll it to its end.

The layer between the StartGraphLoad and PollGraphLoad handlers and the adapters: `start.start`
and `poll.poll` are their entries; `endpoint_check` checks a property graph's edge endpoints
before its load starts.
"""
