"""Google's Decisions shape (`google-genai`'s `client.decisions.create`): a third wire format over the same core.

It shares `POST /v1/decisions` with OpenAI's Decisions API, whose view answers it: a body whose `questions` is a
map of ids to questions is Google's (`format.FORMAT.claims`), and a request carrying `x-goog-api-key` gets its
errors in Google's shape before its body is read. `parsing` turns a body into the core's `EvaluationRequest` or
every problem found, `service` evaluates it exactly as `POST /v1/systemone` does, `render` writes the answers under
the caller's ids, `errors` is Google's error shape and `openapi` documents the shape on the path's operation. Its own
view (`views`, `urls`) serves `POST /v1beta/decisions`, the path Google's clients post to by default, where the
shape is the only one (`openapi_v1beta` documents it), and every other path under `/v1beta/` answers in its shape.
"""
