"""Roles on the dashboard and the API (a users file: hashed passwords, tokens): a viewer
reads, an operator acts on work, an admin also purges; each action is recorded with the
user's name; the pages show each role only what it may do (in a real browser too);
failed sign-ins are limited per address; the command line makes the file's entries."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from tests.support.helpers import running, wait_for
from tickwork.api.users import (
    FAILURES_MOST,
    Users,
    check_password,
    hash_password,
    token_digest,
)
from tickwork.cli import cli
from tickwork.dashboard import create_dashboard
from tickwork.scheduler import App, RetryPolicy
from tickwork.triggers import Cron

PASSWORDS = {"ann": "ann-pw-1", "olga": "olga-pw-2", "vic": "vic-pw-3"}
TOKEN = "t0ken-for-the-deploy-bot"


def _users_file(tmp_path: Path) -> Path:
    roles = {"ann": "admin", "olga": "operator", "vic": "viewer"}
    lines = []
    for name, role in roles.items():
        lines += [
            f"[users.{name}]",
            f'password = "{hash_password(PASSWORDS[name])}"',
            f'role = "{role}"',
        ]
    lines += ["[tokens.deploy]", f'sha256 = "{token_digest(TOKEN)}"', 'role = "operator"']
    path = tmp_path / "users.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _basic(name: str, password: str | None = None) -> dict[str, str]:
    raw = f"{name}:{password or PASSWORDS[name]}".encode()
    return {"Authorization": "Basic " + base64.b64encode(raw).decode()}


def _post(client: TestClient, who: str, path: str) -> Any:
    page = client.get("/", headers=_basic(who)).text
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    token = found.group(1) if found else "none"
    return client.post(
        path, data={"csrf": token, "next": "/"}, headers=_basic(who), follow_redirects=False
    )


@pytest.fixture
def setup(app: App, tmp_path: Path) -> tuple[App, TestClient, Users]:

    @app.task
    def report() -> None: ...

    @app.task(retry=RetryPolicy(retries=0))
    def fails(n: int) -> None:
        raise ValueError(f"failure {n}")

    report.schedule(trigger=Cron("0 9 * * *"), key="report")
    fails.delay(1)
    fails.delay(2)
    with running(app):
        wait_for(lambda: len(app.backend.poison.list()) == 2)
    guard = Users.load(_users_file(tmp_path))
    return app, TestClient(create_dashboard(app, guard)), guard


def test_each_role_may_do_what_it_is_given(setup: tuple[App, TestClient, Users]) -> None:
    app, client, _ = setup
    assert client.get("/").status_code == 401
    assert client.get("/", headers=_basic("vic")).status_code == 200
    assert _post(client, "vic", "/schedules/default/report/pause").status_code == 403
    assert _post(client, "olga", "/schedules/default/report/pause").status_code == 303
    (paused,) = app.schedules.actions("report")
    assert (paused.action, paused.actor) == ("pause", "olga")
    one, two = app.backend.poison.list()
    assert _post(client, "olga", f"/poison/{one.envelope.id}/purge").status_code == 403
    assert _post(client, "olga", f"/poison/{one.envelope.id}/replay").status_code == 303
    assert _post(client, "ann", f"/poison/{two.envelope.id}/purge").status_code == 303
    assert app.backend.poison.list() == []
    # every action taken is in the audit log, with who took it
    audit = client.get("/api/v1/audit", headers=_basic("vic")).json()
    assert [(a["actor"], a["action"]) for a in audit] == [
        ("ann", "poison.purge"),
        ("olga", "poison.replay"),
        ("olga", "schedule.pause"),
    ]
    # the pages show each role what it may do
    assert "run now</button>" not in client.get("/schedules", headers=_basic("vic")).text
    assert "run now</button>" in client.get("/schedules", headers=_basic("olga")).text


def test_the_api_takes_tokens_with_roles(setup: tuple[App, TestClient, Users]) -> None:
    app, client, _ = setup
    body = {"task": "tests.integration.test_roles.report"}
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert client.post("/api/v1/messages", json=body, headers=bearer).status_code == 200
    viewer = client.post("/api/v1/messages", json=body, headers=_basic("vic"))
    assert viewer.status_code == 403 and viewer.json()["error"]["code"] == "forbidden"
    assert client.get("/api/v1/queues", headers=_basic("vic")).status_code == 200
    wrong = client.get("/api/v1/queues", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
    purged = client.post("/api/v1/poison/purge", json={"queue": "default"}, headers=bearer)
    assert purged.status_code == 403 and "admin" in purged.json()["error"]["message"]
    paused = client.post("/api/v1/schedules/report/pause", json={}, headers=bearer)
    assert paused.json() == {"done": True}
    assert app.schedules.actions("report")[0].actor == "token:deploy"
    actions = [(a.actor, a.action, a.outcome) for a in app.audit.recent()]
    assert actions[0][:2] == ("token:deploy", "schedule.pause")
    assert ("vic", "api POST /messages", "refused: forbidden") in actions


def test_failed_sign_ins_are_limited_per_address(setup: tuple[App, TestClient, Users]) -> None:
    _, client, _ = setup
    for _ in range(FAILURES_MOST):
        assert client.get("/", headers=_basic("ann", "guess")).status_code == 401
    assert client.get("/", headers=_basic("ann", "guess")).status_code == 429
    assert client.get("/", headers=_basic("ann")).status_code == 429, "locked out for a while"
    locked = client.get("/api/v1/queues", headers=_basic("ann"))
    assert locked.json()["error"]["code"] == "rate_limited"


def test_the_users_file_is_checked_and_made_from_the_command_line(tmp_path: Path) -> None:
    runner = CliRunner()
    made = runner.invoke(cli, ["users", "hash", "--password", "s3cret"])
    assert made.exit_code == 0 and check_password("s3cret", made.output.strip())
    assert not check_password("other", made.output.strip())
    token = runner.invoke(cli, ["users", "token", "ci", "--role", "viewer"])
    assert token.exit_code == 0 and 'role = "viewer"' in token.stdout
    assert "the token for ci (give it to the program; it is not kept): " in token.stderr
    secret = token.stderr.split("it is not kept): ", 1)[1].split()[0]
    assert secret not in token.stdout, "stdout is the file's lines alone"
    assert token_digest(secret) in token.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[users.x]\npassword = "plain"\nrole = "admin"\n')
    with pytest.raises(ValueError, match="as a hash"):
        Users.load(bad)
    bad.write_text('[users.x]\npassword = "scrypt$1$1$1$a$b"\nrole = "boss"\n')
    with pytest.raises(ValueError, match="viewer, operator or admin"):
        Users.load(bad)


@pytest.mark.slow
def test_in_a_browser_each_role_sees_its_own_actions(setup: tuple[App, TestClient, Users]) -> None:
    from selenium.webdriver.common.by import By

    from tests.support.browser import browser, served

    app, _, guard = setup
    with served(create_dashboard(app, guard)) as base, browser() as driver:
        seen: dict[str, set[str]] = {}
        for name in ("vic", "olga", "ann"):
            signed = base.replace("://", f"://{name}:{PASSWORDS[name]}@")
            driver.get(f"{signed}/poison")
            buttons = driver.find_elements(By.CSS_SELECTOR, "button")
            seen[name] = {b.text for b in buttons if b.text}
        assert not {"replay", "purge"} & seen["vic"]
        assert "replay" in seen["olga"] and "purge" not in seen["olga"]
        assert {"replay", "purge"} <= seen["ann"]
