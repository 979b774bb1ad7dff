"""Django settings. Every deployment knob is an OPENJEV_* variable read by the app (`serving.config`)."""

from __future__ import annotations

from datetime import timedelta

import dj_database_url

from openjev_site.channel_layers import channel_layers_config
from openjev_site.csp import site_policy
from serving.config import BASE_DIR, config_from_env

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

DATABASES = {"default": dj_database_url.parse(OPENJEV.database_url, conn_max_age=0)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers (the admin) run beside the writer; IMMEDIATE transactions and a busy
    # timeout make concurrent writers wait their turn instead of failing with "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # Tests use a file too (not Django's in-memory default), so the storage writer thread, the admin
    # and the API see one WAL database exactly as in production.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "test-db.sqlite3")}

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
    "EXCEPTION_HANDLER": "api.errors.api_exception_handler",
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
