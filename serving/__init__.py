"""`manage.py serve`'s machinery, without Django: SGLang launch profiles, the supervisor that launches and
watches SGLang, and the in-process ASGI servers (uvicorn, daphne) with their timeouts and signals.

The management command (`api/management/commands/serve.py`) decides what a failure means for
the API; nothing here imports Django or the app, so the Modal app and the tests can use it directly.
"""
