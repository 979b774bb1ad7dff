"""The admin permissions the pages outside the model admins check themselves (`admin_view` admits any staff user):
what a page shows decides which, as the model admins' own lists would."""

VIEW_EVALUATIONS = "evaluations.view_evaluation"
"""The stored evaluations: their list, the dashboard page and its live socket."""
VIEW_API_KEYS = "evaluations.view_apikey"
"""API keys: their list, a key's usage page, and the dashboard's volumes by key (which name the keys)."""
