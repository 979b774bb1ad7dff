"""ASGI entry point: the body guard in front of Django.

The engine is built on first use (any API call, or the load balancer's first `/health` probe), in a
worker thread, so importing the application stays fast and side-effect free.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

django_application = get_asgi_application()

from django.conf import settings  # noqa: E402  (settings are ready only after get_asgi_application)

from openjev_site.bodyguard import BodyGuard  # noqa: E402

application = BodyGuard(django_application, max_bytes=settings.OPENJEV.max_body_bytes)
