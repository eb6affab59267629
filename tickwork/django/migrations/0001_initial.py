"""The dashboard's permission (an unmanaged model: no table)."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [
        migrations.CreateModel(
            name="Dashboard",
            fields=[
                (
                    "id",
                    models.AutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
            ],
            options={
                "managed": False,
                "default_permissions": (),
                "permissions": [
                    (
                        "act_on_dashboard",
                        "Can act on the tickwork dashboard (pause, cancel, replay)",
                    )
                ],
            },
        ),
    ]
