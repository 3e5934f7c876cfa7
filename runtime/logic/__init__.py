"""Pure logic of the loader: the stdlib and pydantic (the input's models) only; no boto3, no
os.environ, no network or disk."""
