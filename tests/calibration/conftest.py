"""Calibration tests: labels, fitting, tenants, the admin; stored data, each test isolated (`tests/stored.py`)."""

from tests.stored import storage_isolated

__all__ = ["storage_isolated"]
