from django.urls import path

from api.google.openapi import V1BETA_PATH
from api.google.views import GoogleDecisionsView

urlpatterns = [path(V1BETA_PATH.lstrip("/"), GoogleDecisionsView.as_view(), name="google-decisions")]
