"""``vmbench export``: line protocol and OpenMetrics text of a stored real run (the committed v1
database), escaping, the InfluxDB target's options (secrets from a file or the environment,
never argv), the 2.x write's request shape against a small HTTP handler on 127.0.0.1 (no
InfluxDB 2.x is packaged in Debian 12; the 1.x server is tested for real in
tests/integration/test_export_influx.py), and a file replaced whole or not at all."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from vmbench.cli.export import influx_target, post, write_atomic
from vmbench.cli.main import main
from vmbench.cli.parsers import TOKEN_ENV, add_export
from vmbench.errors import ExportError, UsageError
from vmbench.report.export import Point, influx_line, openmetrics_text


@pytest.fixture
def v1db(tmp_path, data_dir):
    db = tmp_path / "r.db"
    shutil.copyfile(data_dir / "results-v1.db", db)
    return db


def args(*argv: str) -> argparse.Namespace:
    return add_export(argparse.ArgumentParser().add_subparsers()).parse_args(["latest", *argv])


def test_line_protocol_escapes_tags_and_strings():
    p = Point({"cell": "cache=writeback, io", "job": "4k randwrite"}, {"iops": 1.5, "repeats": 3, "run_tag": 'a"b'}, 1700000000)
    assert influx_line(p) == 'vmbench,cell=cache\\=writeback\\,\\ io,job=4k\\ randwrite iops=1.5,repeats=3i,run_tag="a\\"b" 1700000000'


def test_export_of_a_stored_run_matches_its_report(v1db, capsys):
    assert main(["report", "latest", "--db", str(v1db), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    gaps = {(r["side"], r["cell"], r["job"]): r for r in report["tables"][0]["records"]}
    assert main(["export", "latest", "--db", str(v1db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 10  # host x 2 jobs, 2 cells x (raw, ext4) x 2 jobs
    seen = 0
    for line in lines:
        head, fields, stamp = line.split(" ")
        tags = {k: v.replace("\\=", "=") for k, v in (re.split(r"(?<!\\)=", t, maxsplit=1) for t in re.split(r"(?<!\\),", head)[1:])}
        f = {k: v for k, v in (x.split("=", 1) for x in fields.split(","))}
        assert stamp == "1795256265" and tags["scenario"] == "v1-fixture" and tags["host"] == "vm"
        r = gaps.get((tags["side"], tags.get("cell", ""), tags["job"]))
        if r is None or tags.get("stack"):
            continue
        seen += 1
        assert float(f["iops"]) == pytest.approx(r["iops"]) and float(f["mbps"]) == pytest.approx(r["mb_s"])
        for k, rk in (("p50", "p50_ms"), ("p99", "p99_ms"), ("p999", "p999_ms"), ("gap", "gap")):
            assert float(f[k]) == pytest.approx(r[rk]), k
    assert seen == 6


def test_openmetrics_has_help_type_and_eof(v1db, capsys):
    assert main(["export", "latest", "--db", str(v1db), "--format", "openmetrics"]) == 0
    text = capsys.readouterr().out
    assert text.endswith("# EOF\n") and "# TYPE vmbench_iops gauge" in text
    assert 'vmbench_clat_p99_seconds{host="vm",node="vm",scenario="v1-fixture",side="host",layer="host",job="4k-randwrite"} 0.000114176' in text
    assert 'vmbench_run_info{host="vm",node="vm",scenario="v1-fixture",run_id="1",run_tag="r08c806d2",vmbench_version=' in text


def test_history_openmetrics_stamps_each_sample_oldest_first():
    from vmbench.results.db import RunRow

    runs = [RunRow(i, f"t{i}", "s", "s.yaml", "ok", f"2026-01-0{i}T00:00:00+00:00", None, None, {"hostname": "h"}, {})
            for i in (1, 2)]
    pts = [Point({"host": "h", "scenario": "s", "job": "j"}, {"iops": float(i)}, 1767225600 + 86400 * (i - 1)) for i in (2, 1)]
    text = openmetrics_text(pts, runs, timestamps=True)
    assert 'vmbench_iops{host="h",scenario="s",job="j"} 1 1767225600\nvmbench_iops{host="h",scenario="s",job="j"} 2 1767312000' in text
    assert "# TYPE vmbench_run info" in text


# ---- where to -----------------------------------------------------------------------------------


def test_no_url_no_target_and_its_options_need_one():
    assert influx_target(args()) is None
    with pytest.raises(UsageError, match="--database needs --url"):
        influx_target(args("--database", "x"))


def test_influx1_password_from_a_file(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    t = influx_target(args("--url", "http://127.0.0.1:8086/", "--database", "vmbench", "--user", "bench", "--password-file", str(pw)))
    assert (t.url, t.params, t.auth, t.token) == ("http://127.0.0.1:8086/write", {"db": "vmbench", "precision": "s"}, ("bench", "s3cret"), None)


def test_influx2_token_from_the_environment_never_argv(monkeypatch, tmp_path):
    with pytest.raises(UsageError) as exc:  # a token on the command line is refused, and not repeated
        influx_target(args("--url", "https://127.0.0.1:8086", "--org", "o", "--bucket", "b", "--token", "s3cret"))
    assert "never taken from the command line" in exc.value.message and "s3cret" not in exc.value.message + exc.value.hint
    with pytest.raises(UsageError):
        influx_target(args("--url", "https://127.0.0.1:8086", "--database", "d", "--user", "u", "--password", "s3cret"))
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(UsageError, match="InfluxDB 2.x needs an API token"):
        influx_target(args("--url", "https://127.0.0.1:8086", "--org", "o", "--bucket", "b"))
    monkeypatch.setenv(TOKEN_ENV, "tok")
    t = influx_target(args("--url", "https://127.0.0.1:8086/api/v2/write", "--org", "o", "--bucket", "b"))
    assert (t.url, t.params, t.token, t.verify) == ("https://127.0.0.1:8086/api/v2/write", {"org": "o", "bucket": "b", "precision": "s"},
                                                    "tok", True)


@pytest.mark.parametrize("argv, message", [
    (["--url", "ftp://x/", "--database", "d"], "not an http:// or https:// URL"),
    (["--url", "http://127.0.0.1:8086"], "--url needs --database (InfluxDB 1.x) or --org and --bucket"),
    (["--url", "http://127.0.0.1:8086", "--org", "o"], "needs both --org and --bucket"),
    (["--url", "http://127.0.0.1:8086", "--database", "d", "--bucket", "b"], "do not mix"),
    (["--url", "http://127.0.0.1:8086", "--database", "d", "--password-file", "/nonexistent/pw"], "--password-file /nonexistent/pw"),
    (["--url", "http://127.0.0.1:8086", "--database", "d", "-o", "x"], "give --url or -o, not both"),
    (["--url", "http://127.0.0.1:8086", "--database", "d", "--ca-file", "/nonexistent/ca"], "--ca-file /nonexistent/ca: no such file"),
])
def test_bad_destinations_are_refused_before_sending(argv, message):
    with pytest.raises(UsageError) as exc:
        influx_target(args(*argv))
    assert message in exc.value.message


class Influx2(BaseHTTPRequestHandler):
    """Answers /api/v2/write as InfluxDB 2.x does: 204, or 401 for another token."""

    seen: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        Influx2.seen.append((self.path, dict(self.headers), body))
        if self.headers.get("Authorization") != "Token good-token":
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"code":"unauthorized","message":"unauthorized access"}')
            return
        self.send_response(204)
        self.end_headers()

    def log_message(self, *a):
        pass


@pytest.fixture
def influx2():
    server = HTTPServer(("127.0.0.1", 0), Influx2)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Influx2.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_influx2_write_request_shape(influx2, v1db, monkeypatch, tmp_path, capsys):
    token = tmp_path / "token"
    token.write_text("good-token\n")
    assert main(["export", "latest", "--db", str(v1db), "--url", influx2, "--org", "ops", "--bucket", "vmbench",
                 "--token-file", str(token)]) == 0
    (path, headers, body), = Influx2.seen
    assert path == "/api/v2/write?org=ops&bucket=vmbench&precision=s"
    assert headers["Authorization"] == "Token good-token" and headers["Content-Type"] == "text/plain; charset=utf-8"
    assert body.count("\n") == 10 and body.startswith("vmbench,host=vm,job=4k-randwrite,layer=host")
    assert "wrote 10 point(s) of 1 run(s) to " + influx2 in capsys.readouterr().err
    monkeypatch.setenv(TOKEN_ENV, "wrong-token")
    assert main(["export", "latest", "--db", str(v1db), "--url", influx2, "--org", "ops", "--bucket", "vmbench"]) == 4
    err = capsys.readouterr().err
    assert "refused the credentials (HTTP 401: " in err and "wrong-token" not in err


def test_a_closed_port_is_one_clear_error_after_one_retry():
    t = influx_target(args("--url", "http://127.0.0.1:9", "--database", "d", "--timeout", "5"))
    with pytest.raises(ExportError) as exc:
        post(t, "vmbench x=1 1\n")
    assert exc.value.message == "cannot reach InfluxDB at http://127.0.0.1:9/write: connection refused (tried twice)"


def test_a_file_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    target = tmp_path / "vmbench.prom"
    write_atomic(str(target), "old\n")
    assert target.read_text() == "old\n" and oct(target.stat().st_mode & 0o777) == "0o644"

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ExportError) as exc:
        write_atomic(str(target), "new\n")
    assert "could not write" in exc.value.message and "No space left on device" in exc.value.message
    assert exc.value.hint == "free some space"
    assert target.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["vmbench.prom"]
