"""A Prometheus server of a test's own (Debian's ``prometheus``, installed when missing),
scraping the given targets every second, and its query API: what an autoscaler or an
alert reads, evaluated by Prometheus itself rather than by the test."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.servers import (
    ensure_debian_packages,
    free_port,
    stop_process,
    wait_for_port,
)


class PrometheusServer:
    """``prometheus`` on a free loopback port, scraping ``targets`` (host:port) every second."""

    def __init__(self, folder: Path, targets: list[str]) -> None:
        ensure_debian_packages(["prometheus"], ["prometheus"])
        self.port = free_port()
        config = folder / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            f"  - job_name: tickwork\n    static_configs: [{{targets: {json.dumps(targets)}}}]\n"
        )
        self._log = (folder / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_for_port(self.port, 60)

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """The instant vector ``promql`` evaluates to (now, or at the Unix time ``at``):
        each series' labels under "metric" and ``[time, "value"]`` under "value"."""
        fields = {"query": promql} if at is None else {"query": promql, "time": str(at)}
        url = f"http://127.0.0.1:{self.port}/api/v1/query?{urllib.parse.urlencode(fields)}"
        with urllib.request.urlopen(url, timeout=30) as answer:
            reply = json.loads(answer.read())
        assert reply["status"] == "success", reply
        result: list[dict[str, Any]] = reply["data"]["result"]
        return result

    def stop(self) -> None:
        stop_process(self.process, 30)
        self._log.close()
