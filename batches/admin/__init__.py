"""The admin of batch jobs: batches with their progress, cancel and downloads (`batches`), and their lines linked
to their stored evaluations (`items`). Importing the modules registers them."""

from batches.admin import batches, items

__all__ = ["batches", "items"]
