"""The RADOS ceiling of an RBD pool as measurements: ``rados bench`` run and stored beside fio's rows.

A plan on RBD storage measures, at its first host reference, each read or write job once per
repeat with ``rados bench`` (:mod:`vmbench.storage.radosbench`): a host row on the layer
:data:`~vmbench.storage.radosbench.RADOS_LAYER`, under the same cell and job as the host's fio rows.  Its figures are the
bench's own (operations and bytes a second); it has no latency histogram, so its percentiles
are empty, and its average latency is kept in the stored JSON.  What a bench writes is bounded
and found again by its marker (:mod:`vmbench.storage.radosbench`).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from typing import Callable

from ..errors import VmbenchError
from ..fio.job import FioJob, job_hash
from ..results.key import MeasurementKey
from ..results.records import JobParams, Measurement, Settings
from ..scenario.model import CephConfig
from ..storage.radosbench import (MARKER_TEXT, RadosResult, cleanup_argvs, marker_argv, parse_bench, rados_mode, read_argv,
                                  seconds, write_argv)
from ..transport.base import Transport

log = logging.getLogger(__name__)
BENCH_SLACK_S = 120.0  # connecting, the cleanup
PREFILL_SLACK_S = 300.0  # a prefill runs until it has its objects (PREFILL_SECONDS at most)
CLEANUP_TIMEOUT_S = 600.0


def bench(side: Transport, cfg: CephConfig, job: FioJob, run_tag: str,
          left: Callable[[str], None] | None = None) -> tuple[list[str], RadosResult, str]:
    """Run the job's bench on ``side`` (a read job: a prefill write of the job's size, then the
    reads), always removing its objects; (the measuring argv, its result, its JSON).  A bench
    whose objects could not be removed calls ``left`` with its run name (the run names it in
    its warning and tries again at its end; ``vmbench cleanup`` finds it by its marker)."""
    mode = rados_mode(job)
    if mode is None:
        raise ValueError(f"job {job.name} has no RADOS bench (a mixed job or a job file)")
    run_name = f"vmbench-{run_tag}-{secrets.token_hex(4)}"
    timeout = seconds(job) + BENCH_SLACK_S
    side.run(marker_argv(cfg, run_name), input=MARKER_TEXT, timeout=BENCH_SLACK_S)  # before any object of the bench
    try:
        if mode == "write":
            argv = write_argv(cfg, job, run_name)
            text = side.run(argv, timeout=timeout).stdout
        else:
            side.run(write_argv(cfg, job, run_name, prefill=True), timeout=timeout + PREFILL_SLACK_S)
            argv = read_argv(cfg, job, run_name, mode)
            text = side.run(argv, timeout=timeout).stdout
    finally:
        if not remove_bench(side, cfg, run_name) and left is not None:
            left(run_name)
    result, data = parse_bench(text)
    return argv, result, json.dumps(data)


def remove_bench(side: Transport, cfg: CephConfig, run_name: str) -> bool:
    """Remove one bench's objects and its marker (:func:`~vmbench.storage.radosbench.cleanup_argvs`);
    False when something could not be (never raises: it runs on the way out of errors too)."""
    for argv, must in cleanup_argvs(cfg, run_name):
        try:
            done = side.run(argv, timeout=CLEANUP_TIMEOUT_S, check=False)
        except VmbenchError as exc:
            log.warning("removing rados bench objects of %s on %s: %s", run_name, side.name, exc)
            return False
        if must and done.returncode != 0 and "No such file" not in done.stderr:
            log.warning("removing rados bench objects of %s on %s: %s", run_name, side.name, done.stderr.strip()[-300:])
            return False
    return True


def rados_measurement(key: MeasurementKey, job: FioJob, argv: list[str], result: RadosResult, raw: str, *, cell_id: int | None,
                      attempt: int, settings: dict, pool: str, host: str) -> Measurement:
    """The record of one ``rados bench``: no latency histogram, rados's output as fio's."""
    return Measurement(
        side=key.side, layer=key.layer, job=key.job, repeat=key.repeat or 0, cell=key.cell, stack=key.stack, vm=key.vm,
        load_step=key.load_step, host=host, cell_id=cell_id, boot_id=None, attempt=attempt, depth=0,
        job_params=JobParams.from_row(job.params()), job_hash=job_hash(job), sync=job.is_sync, target=f"rados:{pool}",
        argv_json=json.dumps(argv), settings=Settings.of(settings), accelerator="host",
        started_at=time.strftime("%Y-%m-%dT%H:%M:%S"), iops=result.iops, bw_bytes=result.bw_bytes, fio_json=raw)
