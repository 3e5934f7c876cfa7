"""Planning a job: validate the input, size its source objects, cut shards, write the manifest.

The layer between the Plan handler and the adapters (`service.plan` is its one entry): `sources`
finds the objects and reads their headers or Parquet footers, `service` cuts the shards, claims
the jobId in the ledger and writes the manifest.
"""
