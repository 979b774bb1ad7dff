"""Google's Decisions shape (`google-genai`'s `client.decisions.create`): a third wire format over the same core.

It shares `POST /v1/decisions` with OpenAI's Decisions API, whose view answers it: a body whose `questions` is a
map of ids to questions is Google's (`format.FORMAT.claims`), and a request carrying `x-goog-api-key` gets its
errors in Google's shape before its body is read. `parsing` turns a body into the core's `EvaluationRequest` or
every problem found, `service` evaluates it exactly as `POST /v1/systemone` does, `render` writes the answers under
the caller's ids, `errors` is Google's error shape and `openapi` documents the shape on the path's operation. It has
no view and no URLs of its own.
"""
