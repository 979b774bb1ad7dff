#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")
    from django.core.management import execute_from_command_line

    from serving.options import command_environment
    from serving.setting_rules import ConfigError

    os.environ.update(command_environment(argv=sys.argv[1:]))  # before the settings load: the options win
    try:
        execute_from_command_line(sys.argv)
    except ConfigError as exc:  # an OPENJEV_* value the service cannot run with: one line, not a traceback
        sys.exit(str(exc))


if __name__ == "__main__":
    main()
