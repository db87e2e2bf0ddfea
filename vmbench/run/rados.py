"""The RADOS ceiling of an RBD pool as measurements: ``rados bench`` run and stored beside fio's rows.

A plan on RBD storage measures, at its first host reference, each read or write job once per
repeat with ``rados bench`` (:mod:`vmbench.storage.radosbench`): a host row on the layer
:data:`~vmbench.storage.radosbench.RADOS_LAYER`, under the same cell and job as the host's fio rows.  Its figures are the
bench's own (operations and bytes a second); it has no latency histogram, so its percentiles
are empty, and its average latency is kept in the stored JSON.
"""

from __future__ import annotations

import json
import secrets
import time

from ..fio.job import FioJob, job_hash
from ..results.key import MeasurementKey
from ..results.records import JobParams, Measurement, Settings
from ..scenario.model import CephConfig
from ..storage.radosbench import RadosResult, cleanup_argv, parse_bench, rados_mode, read_argv, seconds, write_argv
from ..transport.base import Transport

BENCH_SLACK_S = 120.0  # connecting, the prefill's objects, the cleanup


def bench(side: Transport, cfg: CephConfig, job: FioJob, run_tag: str) -> tuple[list[str], RadosResult, str]:
    """Run the job's bench on ``side`` (a read job: a prefill write, then the reads), always
    removing its objects; (the measuring argv, its result, its JSON)."""
    mode = rados_mode(job)
    if mode is None:
        raise ValueError(f"job {job.name} has no RADOS bench (a mixed job or a job file)")
    run_name = f"vmbench-{run_tag}-{secrets.token_hex(4)}"
    timeout = seconds(job) + BENCH_SLACK_S
    try:
        argv = write_argv(cfg, job, run_name)
        text = side.run(argv, timeout=timeout).stdout
        if mode != "write":
            argv = read_argv(cfg, job, run_name, mode)
            text = side.run(argv, timeout=timeout).stdout
    finally:
        side.run(cleanup_argv(cfg, run_name), timeout=600, check=False)
    result, data = parse_bench(text)
    return argv, result, json.dumps(data)


def rados_measurement(key: MeasurementKey, job: FioJob, argv: list[str], result: RadosResult, raw: str, *, cell_id: int | None,
                      attempt: int, settings: dict, pool: str) -> Measurement:
    """The record of one ``rados bench``: no latency histogram, rados's output as fio's."""
    return Measurement(
        side=key.side, layer=key.layer, job=key.job, repeat=key.repeat or 0, cell=key.cell, stack=key.stack, vm=key.vm,
        load_step=key.load_step, host=key.host, cell_id=cell_id, boot_id=None, attempt=attempt, depth=0,
        job_params=JobParams.from_row(job.params()), job_hash=job_hash(job), sync=job.is_sync, target=f"rados:{pool}",
        argv_json=json.dumps(argv), settings=Settings.of(settings), accelerator="host",
        started_at=time.strftime("%Y-%m-%dT%H:%M:%S"), iops=result.iops, bw_bytes=result.bw_bytes, fio_json=raw)
