"""Shared plumbing of the HTTP edge, naming no wire format: body reading, keys, limits, recording, the evaluation
call, metering, tracing, logs and JSON rendering. Each wire format (`api/<format>/`) is described to it by its
`WireFormat` (`api.plumbing.formats`)."""
