"""Preparing compressed sources: gzip and zip archives found by content, decompressed into plain copies.

The layer between the Prepare handler and the adapters (`service.prepare` is its one entry).
"""
