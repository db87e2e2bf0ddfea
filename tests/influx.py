"""A real InfluxDB 1.x server for tests (Debian's ``influxdb`` package: ``influxd``), in a
temporary directory, on free ports of 127.0.0.1, with authentication on.

Never the machine's own influxdb service: its own config, meta, data and WAL directories.  An
admin user (``ADMIN``/``PASSWORD``) and the database ``DATABASE`` exist once it is up;
:meth:`InfluxServer.query` runs InfluxQL as that user and returns the series, times in seconds.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import requests

INFLUXD = "/usr/bin/influxd"
ADMIN, PASSWORD, DATABASE = "admin", "it-admin-pw", "vmbench"

CONFIG = """reporting-disabled = true
bind-address = "127.0.0.1:{rpc}"
[meta]
  dir = "{root}/meta"
[data]
  dir = "{root}/data"
  wal-dir = "{root}/wal"
  query-log-enabled = false
[retention]
  enabled = false
[monitor]
  store-enabled = false
[http]
  enabled = true
  bind-address = "127.0.0.1:{port}"
  auth-enabled = true
  log-enabled = false
[continuous_queries]
  enabled = false
[subscriber]
  enabled = false
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class InfluxServer:
    def __init__(self) -> None:
        if not Path(INFLUXD).exists():
            raise RuntimeError(f"{INFLUXD} is missing: install Debian's influxdb package (scripts/bootstrap does)")
        self.root = Path(tempfile.mkdtemp(prefix="vmbench-influx-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.password_file = self.root / "password"
        self.password_file.write_text(PASSWORD + "\n")
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "InfluxServer":
        conf = self.root / "influxdb.conf"
        conf.write_text(CONFIG.format(root=self.root, rpc=free_port(), port=self.port))
        self.log = open(self.root / "influxd.log", "w")
        self.proc = subprocess.Popen([INFLUXD, "-config", str(conf)], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(self.url + "/ping", timeout=2).status_code == 204:
                    break
            except requests.RequestException:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"influxd did not start: {(self.root / 'influxd.log').read_text()[-2000:]}")
            time.sleep(0.1)
        # with authentication on, the first user may be made without credentials; then nothing is
        self._post(f"CREATE USER {ADMIN} WITH PASSWORD '{PASSWORD}' WITH ALL PRIVILEGES", auth=False)
        self._post(f"CREATE DATABASE {DATABASE}")
        return self

    def _post(self, q: str, auth: bool = True) -> dict:
        r = requests.post(self.url + "/query", data={"q": q}, auth=(ADMIN, PASSWORD) if auth else None, timeout=30)
        r.raise_for_status()
        return r.json()

    def query(self, q: str) -> list[dict]:
        """The rows of an InfluxQL query on :data:`DATABASE`, each a dict by column (time in s)."""
        r = requests.get(self.url + "/query", params={"db": DATABASE, "q": q, "epoch": "s"}, auth=(ADMIN, PASSWORD), timeout=30)
        r.raise_for_status()
        out = []
        for result in r.json()["results"]:
            if "error" in result:
                raise AssertionError(result["error"])
            for series in result.get("series", []):
                out += [dict(zip(series["columns"], values)) for values in series["values"]]
        return out

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)
