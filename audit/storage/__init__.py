"""Storing evaluations without touching the answer: typed records in, rows out, off the event loop.

- `records`: what the API hands in (the request as received, the outcome or the failure, the caller);
- `spool`, `spool_files` and `drain`: an evaluation is durable once it is synced to an append-only file on disk
  (group commit); the drainer writes it into the database, replaying what a dead process left;
- `store`: `evaluation_store`, the spool and drainer of this process, and the drainer's database write;
- `writer`: one generic writer thread with a bounded queue, batching and retries (API key last-use updates in
  `audit.keys`);
- `rows`, `sql`, `scrub` and `usage`: records to column values, the INSERTs compiled once per database, a row
  made storable, the per-key daily usage;
- `collect`: a batch worker keeps its lines' records and writes them with the lines' answers.
"""
