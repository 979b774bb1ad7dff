"""The Celery application batch work runs on: a task is acknowledged only once it has run, a worker holds one task
per process ahead, and an unacknowledged task comes back when its lines' lease ends, so a killed worker's work is
done by another and nothing is lost (the crash itself: test_celery_crash.py)."""

from __future__ import annotations

import pytest
from django.conf import settings

from openjev_site.celery import app
from serving.config_reading import config_from_env
from serving.setting_rules import ConfigError


def test_a_celery_task_is_acknowledged_after_it_ran_and_given_back_when_its_worker_dies():
    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1


def test_an_unacknowledged_task_comes_back_when_its_lines_lease_ends():
    assert app.conf.broker_transport_options["visibility_timeout"] == settings.OPENJEV.batch_lease_seconds


def test_the_celery_worker_knows_the_batch_tasks_before_the_first_arrives():
    assert "api.batches.tasks" in app.conf.imports


def test_the_celery_engine_without_a_broker_is_refused_at_start_naming_the_setting():
    with pytest.raises(ConfigError, match="OPENJEV_CELERY_BROKER_URL"):
        config_from_env({"OPENJEV_TASK_ENGINE": "celery"})
    assert config_from_env({"OPENJEV_TASK_ENGINE": "celery", "OPENJEV_REDIS_URL": "redis://127.0.0.1:6379/0"})
