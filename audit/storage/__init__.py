"""Storing evaluations without touching the answer: typed records in, rows out, off the event loop.

- `records`: what the API hands in (the request as received, the outcome or the failure, the caller);
- `writer`: one generic writer thread with a bounded queue, batching and retries, shared by every kind
  of write (evaluations here, API key last-use updates in `audit.keys`);
- `rows` and `sql`: records to column values, and the INSERTs compiled once per database;
- `store`: `evaluation_store` and the evaluation sink of the writer.
"""
