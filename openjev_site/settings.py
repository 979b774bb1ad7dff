"""Django settings. Every deployment knob is an OPENJEV_* variable read by the app (`serving.config`)."""

from __future__ import annotations

from datetime import timedelta

from openjev_site.channel_layers import channel_layers_config
from openjev_site.csp import site_policy
from openjev_site.databases import databases_config
from serving.config import BASE_DIR
from serving.config_reading import config_from_env

OPENJEV = config_from_env()

SECRET_KEY = OPENJEV.secret_key
DEBUG = OPENJEV.debug
ALLOWED_HOSTS = list(OPENJEV.allowed_hosts)

API_WIRE_FORMATS = ["api.systemone", "api.decisions", "api.google", "api.classify"]
"""The wire formats served, each a package under `api/` with a `format.FORMAT` and its `urls` (`ApiConfig.ready`
installs them for the shared plumbing, `openjev_site.urls` routes them); a format sharing another's path comes
after it and has no `urls` (Google's Decisions shape, answered on OpenAI's `/v1/decisions` by its body)."""

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "audit.apps.AuditConfig",  # label `evaluations`: the stored record
    "calibration.apps.CalibrationConfig",
    "django_tasks_db",
    "batches.apps.BatchesConfig",
    "api.apps.ApiConfig",  # last: its admin module gives every registered model admin the input check
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # The admin's and the docs' Content-Security-Policy (openjev_site/csp.py); the API has no middleware.
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# Admin sign-in throttling (django-axes). Only the admin signs in with a password: the API authenticates by
# Bearer key on its own handler, without this middleware or these backends. A username is locked out per
# address (never everywhere, which would let anyone lock an administrator out); a success resets the count.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = OPENJEV.admin_login_failures
AXES_COOLOFF_TIME = timedelta(seconds=OPENJEV.admin_lockout_seconds)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "admin/lockout.html"
# The address is the one serving.addresses resolved (OPENJEV_TRUSTED_PROXIES), never a header axes reads itself.
AXES_CLIENT_IP_CALLABLE = "serving.addresses.request_client_address"

SECURE_CSP = site_policy(templates=BASE_DIR / "templates")

# Behind TLS (OPENJEV_HTTPS, which needs OPENJEV_TRUSTED_PROXIES: the scheme is a trusted proxy's
# X-Forwarded-Proto, `serving.addresses`), the admin's cookies go over https only, the admin and the docs redirect
# http to https, and their https answers tell browsers to use https for a year (HSTS: Django's SecurityMiddleware,
# which the API's lean handler does not run; the health checks and the metrics, probed by address over http, are
# never redirected). Preloading (W021) is the domain owner's decision, not this service's: it is left off.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = OPENJEV.https
SECURE_REDIRECT_EXEMPT = [r"^health$", r"^health/live$", r"^metrics$"]
SECURE_HSTS_SECONDS = 365 * 24 * 3600 if OPENJEV.https else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = OPENJEV.https

ROOT_URLCONF = "openjev_site.urls"
ASGI_APPLICATION = "openjev_site.asgi.application"
CHANNEL_LAYERS = channel_layers_config(url=OPENJEV.channel_layer_url)
APPEND_SLASH = False
# Behind a gateway that mounts the service under a path: Django otherwise takes it from the ASGI root_path.
FORCE_SCRIPT_NAME = OPENJEV.force_script_name

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.csp",  # `{% csp_nonce_attr %}` in the admin and Swagger UI
            ],
        },
    },
]

DATABASES = databases_config(url=OPENJEV.database_url, timeout=OPENJEV.database_timeout)

# Background work (batch jobs) through Django's tasks API, on the engine OPENJEV_TASK_ENGINE names: a database
# queue (django-tasks-db, worked by `serve` or `manage.py db_worker`) or Celery on Redis (`celery -A openjev_site
# worker`, openjev_site/celery.py), acknowledged late so a killed worker's task is delivered again.
TASKS = {
    "default": {"BACKEND": "django_tasks_db.DatabaseBackend"}
    if OPENJEV.task_engine == "database"
    else {"BACKEND": "django_tasks_celery.CeleryBackend", "OPTIONS": {"CELERY_APP": "openjev_site.celery.app"}}
}
CELERY_BROKER_URL = OPENJEV.celery_broker_url or OPENJEV.redis_url
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# An unacknowledged task (its worker killed) is delivered again after the lease, when its lines are free too.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": OPENJEV.batch_lease_seconds}
# Batch tasks return nothing: their state is the batch's rows, so Celery keeps no results (and says so twice).
SILENCED_SYSTEM_CHECKS = [
    "django_tasks_celery.W001",
    "django_tasks_celery.W002",
    "security.W021",  # HSTS preloading: the domain owner's decision (see OPENJEV_HTTPS above)
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / ".staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]

DATA_UPLOAD_MAX_MEMORY_SIZE = OPENJEV.max_body_bytes + 1024

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "api.plumbing.error_responses.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "OpenJev API",
    "DESCRIPTION": "Typed classification (noul, choice, score) from a language model's label log-probabilities, "
    "in the Jev / TypeSafe System One wire format.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # 3.1: JSON Schema type lists say "string, object or array" without oneOf noise.
    "OAS_VERSION": "3.1.0",
    # Our hook sets the long description, tags, auth scheme and the limits from OPENJEV_*; enums stay inline.
    "POSTPROCESSING_HOOKS": ["api.openapi.document.schema_postprocess"],
    # No call to the public validator badge: the docs must work offline.
    "SWAGGER_UI_SETTINGS": {
        "deepLinking": True,
        "validatorUrl": None,
        "tryItOutEnabled": True,
        "displayRequestDuration": True,
        "persistAuthorization": False,
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Credentials (URL userinfo, configured keys) are redacted from every line, tracebacks included; query
    # strings and Authorization values too, which the servers' access lines would otherwise carry in full.
    "formatters": {
        "plain": {"()": "serving.redaction.RedactingFormatter", "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s"}
        if OPENJEV.log_format == "text"
        else {"()": "api.plumbing.log_format.JsonFormatter"}
    },
    "filters": {"lines": {"()": "serving.access_log.LogLineRedaction"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["lines"]}},
    "root": {"handlers": ["console"], "level": "INFO"},
    # httpx logs every backend call at INFO: one line per branch is noise in production and costs
    # measurable server CPU per evaluation (bench/server.py).
    "loggers": {"django.request": {"level": "ERROR"}, "httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}
