"""The process: `manage.py serve`'s machinery (SGLang launch profiles, the supervisor that launches and
watches SGLang, and the in-process ASGI servers (uvicorn, daphne) with their timeouts and signals).

The management command (`api/management/commands/serve.py`) decides what a failure means for
the API. Besides that machinery, serving/ holds what every room of the app shares about the process: its
settings (`config.py`), its evaluator (`evaluator.py`), log redaction, the framework forks (`compat.py`)
and the Django-free smoke client; the launch machinery imports no Django, so the Modal app and the tests
can use it directly.
"""
