"""A minimal client for tests (urllib; requests/proxmoxer need not be installed): form
encoding as proxmoxer sends it (lists as repeated keys), TLS verified against the fake's CA."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request

from .fake import FakePve


class Reply:
    def __init__(self, status: int, reason: str, body: bytes) -> None:
        self.status, self.reason = status, reason
        self.json = json.loads(body) if body else None

    @property
    def data(self):
        return self.json["data"]

    @property
    def errors(self) -> dict:
        return self.json.get("errors") or {}

    def __repr__(self) -> str:
        return f"<{self.status} {self.reason!r} {self.json!r}>"


def call(fake: FakePve, method: str, path: str, params: dict | None = None, headers: dict | None = None) -> Reply:
    """One request as a form-encoding client (proxmoxer/requests) sends it: lists as repeated keys."""
    pairs = [(k, x) for k, v in (params or {}).items() for x in (v if isinstance(v, list) else [v])]
    query = urllib.parse.urlencode(pairs)
    url, data = fake.api_url + path, None
    if method in ("GET", "DELETE"):
        url += f"?{query}" if query else ""
    else:
        data = query.encode()
    req = urllib.request.Request(url, data=data, method=method, headers=fake.auth_header if headers is None else headers)
    if data is not None:
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
    ctx = ssl.create_default_context(cafile=fake.ca_file)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
            return Reply(r.status, r.reason, r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.reason, e.read())


def ok(reply: Reply):
    assert reply.status == 200, reply
    return reply.data


def wait(fake: FakePve, upid: str, limit: int = 20) -> dict:
    """Poll a task until it stops; returns its final status."""
    node = upid.split(":")[1]
    for _ in range(limit):
        st = ok(call(fake, "GET", f"/nodes/{node}/tasks/{upid}/status"))
        if st["status"] == "stopped":
            return st
    raise AssertionError(f"task {upid} still running after {limit} polls")


def put_json(fake: FakePve, path: str, body: dict) -> Reply:
    req = urllib.request.Request(fake.api_url + path, method="PUT", data=json.dumps(body).encode(),
                                 headers={**fake.auth_header, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=ssl.create_default_context(cafile=fake.ca_file)) as r:
            return Reply(r.status, r.reason, r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.reason, e.read())
