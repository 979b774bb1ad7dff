"""`POST /v1/classify`: saved classifiers, answered by the same core as `POST /v1/systemone`.

SGLang and vLLM serve fine-tuned sequence-classification models at `POST /v1/classify`, and teams
have clients and pipelines for that shape. Here a classifier is a question saved in the admin (a
name, instructions and ordered labels: in effect a saved `choice`, `noul` or `score` question), so
those clients get LLM-backed classification with no fine-tuned model at all.

- `registry`: classifiers as the API serves them, validated, behind a short in-process cache;
- `parsing`: the request body, validated once into a typed request;
- `service`: one request, every input evaluated concurrently under one admission, recorded however it ends.
"""
