"""Finishing a job: reconcile the ledger against the manifest, merge the rejects, write the report.

The layer between the Finalize handler and the adapters (`service.finalize` is its one entry):
`rejects` merges the shards' rejects files into one, `service` reads what the shards recorded and
writes the report.
"""
