from django.urls import path

from api.classify.format import FORMAT
from api.classify.views import ClassifyView

urlpatterns = [path(FORMAT.path.lstrip("/"), ClassifyView.as_view(), name="classify")]
