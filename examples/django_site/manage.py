#!/usr/bin/env python
"""The example Django project's ``manage.py``: ``python manage.py tickwork worker`` runs its
tasks, ``python manage.py runserver`` serves the shop and the dashboard (/tickwork/)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "site_config.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
