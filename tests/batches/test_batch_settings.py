"""The batch settings refused at start when they cannot work as set, naming the settings."""

from __future__ import annotations

import pytest

from serving.config_reading import config_from_env
from serving.setting_rules import ConfigError


def test_more_batch_lines_at_once_than_a_worker_admits_is_refused_at_start():
    over = config_from_env({}).max_concurrent_requests + 1
    with pytest.raises(ConfigError, match="OPENJEV_BATCH_CONCURRENCY must not exceed OPENJEV_MAX_CONCURRENT_REQUESTS"):
        config_from_env({"OPENJEV_BATCH_CONCURRENCY": str(over)})
    both = config_from_env({"OPENJEV_BATCH_CONCURRENCY": "64", "OPENJEV_MAX_CONCURRENT_REQUESTS": "64"})
    assert both.batch_concurrency == both.max_concurrent_requests == 64
