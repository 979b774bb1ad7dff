from django.urls import path

from api.systemone.format import FORMAT
from api.systemone.views import SystemOneView

urlpatterns = [path(FORMAT.path.lstrip("/"), SystemOneView.as_view(), name="systemone")]
