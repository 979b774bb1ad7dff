"""OpenAI's Decisions API (`POST /v1/decisions`): a second wire format over the same core.

`parsing` (with `inputs` for the conversation) turns a body into the core's `EvaluationRequest` or 400s
naming the field (`param`), `service` evaluates it exactly as `POST /v1/systemone` does, `render` writes
the answers in question order. Nothing here scores, calibrates or stores on its own.
"""
