"""Adapters: the only runtime code that talks to AWS (boto3)."""
