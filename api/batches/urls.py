"""OpenAI's Files and Batches routes (`api.batches.views`)."""

from django.urls import path

from api.batches import views
from api.decisions.errors import OPENAI_SHAPE
from api.plumbing.formats import route_shapes_install

ROUTE_PREFIXES = ("/v1/files", "/v1/batches")

urlpatterns = [
    path("v1/files", views.FilesView.as_view(), name="files"),
    path("v1/files/<str:file_id>", views.FileView.as_view(), name="file"),
    path("v1/files/<str:file_id>/content", views.FileContentView.as_view(), name="file-content"),
    path("v1/batches", views.BatchesView.as_view(), name="batches"),
    path("v1/batches/<str:batch_id>", views.BatchView.as_view(), name="batch"),
    path("v1/batches/<str:batch_id>/cancel", views.BatchCancelView.as_view(), name="batch-cancel"),
]


def batch_routes_shape_install() -> None:
    """Every answer under these routes in OpenAI's shape, as the SDK reads it: the body reader's refusals (a late or
    oversized upload) and an unknown id's 404 included, not only the views' own."""
    route_shapes_install(prefixes=ROUTE_PREFIXES, shape=OPENAI_SHAPE)
