"""File jobs in a report (pure): which stored rows are a file job's (fio's file engines, many
files in a directory on a filesystem layer), the host row they compare with (the host's
filesystem of the same type, ``host+ext4``) and what their IOPS count (files/s, stats/s...)."""

from __future__ import annotations

from typing import Sequence

from ..fio.engines import ENGINE_UNITS, FILE_ENGINES
from ..fio.job import FILES_DIR
from ..results.key import MeasurementKey
from ..results.records import JobParams, Measurement

#: what a guest row of a file job says when the host has no filesystem of its type
NO_HOST_ROW = "the host has no like-for-like row"
UNITS_NOTE = ("files/s, stats/s, deletes/s = fio's file engines' operations a second (filecreate, filestat, filedelete; "
              "fio counts them as reads), each file once; their latency is each operation's (create, stat, unlink); "
              "such rows have no MB/s.")
FILE_JOBS_NOTE = ("File jobs (many files in a directory, fio's file engines) run in each filesystem layer's mount only; "
                  "their host row (host+ext4...) is a filesystem of the same type made on the host's volume.")


def file_params(params: JobParams) -> bool:
    """Whether a job's stored parameters are a built-in file job's (a file engine, or nrfiles above 1)."""
    return params.ioengine in FILE_ENGINES or (params.nrfiles or 1) > 1


def is_file_rows(rows: Sequence[Measurement] | None) -> bool:
    """Whether stored measurement rows ran a file job: fio ran in a directory of files."""
    return bool(rows) and any(r.target.endswith("/" + FILES_DIR) for r in rows or ())


def unit_of(rows: Sequence[Measurement] | None) -> str:
    """What the rows' IOPS count: a file engine's operations ("files/s"), else "IOPS"."""
    engine = rows[0].job_params.ioengine if rows else None
    return ENGINE_UNITS.get(str(engine), "IOPS")


def host_fs_group(cell: str | None, layer: str, job: str) -> MeasurementKey:
    """The key of the host's rows of file job ``job`` on the filesystem type of ``layer``
    (a layer path such as "partition+ext4"), stored under ``cell`` (None: the one host reference)."""
    return MeasurementKey("host", cell, None, "host+" + layer.split("+")[-1], job)


def first_rows(chain: Sequence[tuple[str, list[Measurement] | None]]) -> list[Measurement] | None:
    """The rows of the first measured layer of a chain (layer, rows)."""
    return next((rows for _, rows in chain if rows), None)


def first_layer(chain: Sequence[tuple[str, list[Measurement] | None]]) -> str:
    """The first measured layer of a chain (layer, rows)."""
    return next((layer for layer, rows in chain if rows), "raw")
