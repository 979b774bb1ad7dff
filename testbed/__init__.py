"""What the tests and the benchmarks run the service against, shared by both (neither imports the other):
the real Qwen3 tokenizer (`qwen3`), the API under uvicorn on loopback (`live_server`), evaluators wired to
an SGLang-speaking URL (`evaluators`), the real SGLang gateway as a subprocess (`smg`), free ports
(`ports`) and the storage load check (`storage_load`). The SGLang stand-in is its own package,
`fake_sglang`."""
