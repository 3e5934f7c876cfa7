"""Pure logic of the loader: the stdlib, pydantic (the input's models) and, in parquet*.py only,
pyarrow; no boto3, no os.environ, no network or disk."""
