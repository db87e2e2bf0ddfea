"""Checks shared by the integration tests whose real runs sample the VM's QEMU process on the
host (issue 17): every guest measurement carries a "qemu-cpu" telemetry row whose threads add
up to the process, and the report prints the CPU per I/O table."""

from __future__ import annotations

import os

from vmbench.results.db import ResultsDB


def assert_qemu_cpu_sampled(db: ResultsDB, run_id: int, report_text: str) -> list[dict]:
    """Every guest measurement of the run has a qemu-cpu row (accelerator named, I/Os counted,
    the live threads 95-105% of the process's CPU, perf's cycles or why not, the ZFS threads where
    the host, this machine, has ZFS); the text report has the CPU per I/O table.  Returns the rows."""
    guest = {m["id"] for m in db.rows("measurements", run_id) if m["side"] == "guest"}
    rows = {t["measurement_id"]: t["series"] for t in db.telemetry(run_id) if t["source"] == "qemu-cpu"}
    assert guest and set(rows) == guest, (sorted(guest), sorted(rows))
    for row in rows.values():
        print("qemu-cpu", row["accel"], row["ios"], row["accounted_share"], row["process"]["us_per_io"], row.get("perf"))
        assert row["accel"] and row["ios"] > 0, row
        assert 0.95 <= row["accounted_share"] <= 1.05, row["accounted_share"]
        perf = row["perf"]
        assert perf is not None and (perf["cycles_per_io"] is not None or perf["why"].startswith("perf: ")), perf
        assert (row["host"]["zfs"] is None) == (not os.path.isdir("/sys/module/zfs")), row["host"]["zfs"]
    assert "CPU per I/O\n" in report_text and "QEMU total µs/IO" in report_text, report_text
    assert "QEMU cycles/IO" in report_text, report_text  # its column, or why perf counted none
    return list(rows.values())
