from django.urls import path

from api.decisions.format import FORMAT
from api.decisions.views import DecisionsView

urlpatterns = [path(FORMAT.path.lstrip("/"), DecisionsView.as_view(), name="decisions")]
