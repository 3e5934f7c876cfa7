"""Pure logic of the loader: stdlib only, no boto3, no os.environ."""
