"""Processing one shard: read its byte range, turn it into records, write or stage them, count them.

The layer between the Worker handler and the adapters (`service.process_shard` is its one entry):
`sources` reads the range, `records` runs the per-record loop, `writing` sends items to DynamoDB,
`staging` streams rejects and graph files to S3, `rejects` keeps the rejected records.
"""
