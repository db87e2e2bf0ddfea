"""What a results database holds, as frozen records: the one place that knows the stored
columns and JSON keys.

Each record reads a row of any schema version (:meth:`from_row`: a column an older version
lacks reads as its default; the ``X_json`` columns as their text, or decoded under ``X``) and
writes the current one (:meth:`to_row`).  Readers (the report, the advice, ``compare``,
``history``, ``export``) use attributes; a figure derived from a record is a property or a new
record (:func:`dataclasses.replace`), never an edit.

* :class:`Measurement`: one fio run (or RADOS bench) of one job, its key
  (:class:`~vmbench.results.key.MeasurementKey`), figures and latency histogram (the truth of
  its percentiles: the stored ``p50_ns`` ... ``p999_ns`` are written from it), the fio job as
  stored (:class:`JobParams`), the VM settings (:class:`Settings`), a load step's window
  (:class:`LoadRecord`) and, as the report attaches them, the samplers' means
  (:class:`Telemetry`), the QEMU process's CPU row and the cell it is shared from;
* :class:`CellRecord`, :class:`BootRecord`, :class:`CryptoRecord`, :class:`SeriesRecord`;
* :class:`~vmbench.results.vmsettings.Settings` (:mod:`.vmsettings`): a cell's, a boot's or a
  measurement's VM settings as stored, a read-only mapping read back typed through the axis
  table (:mod:`vmbench.scenario.axes`).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, TypeVar

from ..fio.histogram import PERCENTILES, Histogram
from .key import MeasurementKey
from .vmsettings import Settings, settings_of_row

R = TypeVar("R")


def decoded(row: Mapping[str, Any], name: str, default: Any) -> Any:
    """Column ``name`` of a stored row: its ``name_json`` text decoded, or the decoded value
    under ``name`` (a row as a reader made it); ``default`` when neither (an older schema)."""
    value = row.get(name + "_json", row.get(name))
    if isinstance(value, str):
        return json.loads(value) if value else default
    return default if value is None else value


def _text(row: Mapping[str, Any], name: str, default: str = "{}") -> str:
    """Column ``name``'s JSON as text (a decoded value encoded again)."""
    value = row.get(name + "_json", row.get(name))
    if isinstance(value, str):
        return value
    return default if value is None else json.dumps(value, sort_keys=True, default=str)


def _by_text(make: Callable[[str], R]) -> Callable[[str], R]:
    """``make`` cached by its text: the rows of a run share a handful of job parameters and
    settings, each decoded once."""
    return functools.lru_cache(maxsize=1024)(make)


# ---- a measurement's parts ------------------------------------------------------------------


@dataclass(frozen=True)
class JobParams:
    """A measurement's fio job as stored (:meth:`vmbench.fio.job.FioJob.params`): each
    parameter a reader interprets, None where the row does not store it; ``stored`` is all of
    it, as stored (compared key by key across runs)."""

    stored: Mapping[str, Any] = field(default_factory=dict)
    rw: str | None = None
    size: Any = None
    direct: bool | None = None
    runtime: float | None = None
    ramp: float | None = None
    numjobs: int | None = None
    rwmixread: int | None = None
    ioengine: str | None = None
    nrfiles: int | None = None
    rate_iops: Any = None
    rate: Any = None
    steadystate: str | None = None
    buffer_compress_percentage: int | None = None
    refill_buffers: bool | None = None
    jobfile: Mapping[str, Any] | None = None  # {"path", "sha256"}: a user's own job file

    @classmethod
    def from_row(cls, stored: Mapping[str, Any] | None) -> "JobParams":
        data = dict(stored or {}) if isinstance(stored, Mapping) else {}
        return cls(data, **{f.name: data.get(f.name) for f in fields(cls) if f.name != "stored"})

    @property
    def file_job(self) -> bool:
        """A user's own job file (it can do anything: its rw is not read)."""
        return self.jobfile is not None

    @property
    def builtin_rw(self) -> str | None:
        """A built-in job's rw (None for a job file's)."""
        return None if self.file_job else self.rw


@_by_text
def _job_params(text: str) -> JobParams:
    return JobParams.from_row(json.loads(text) if text else {})


@dataclass(frozen=True)
class NicRecord:
    """A host's busiest network interface over a load round, as stored
    (:meth:`vmbench.telemetry.nic.NicRate.to_json`): its rate (MB/s, received plus sent), its
    link speed (None: it says none) and the rate's share of it."""

    stored: Mapping[str, Any] = field(default_factory=dict)
    iface: str = ""
    mb_s: float | None = None
    speed_mbit: int | None = None
    share: float | None = None

    @classmethod
    def from_row(cls, stored: Any) -> "NicRecord | None":
        """The stored reading; None for none."""
        if not isinstance(stored, Mapping):
            return None
        return cls(stored, str(stored.get("iface") or ""), stored.get("mb_s"), stored.get("speed_mbit"), stored.get("share"))


@dataclass(frozen=True)
class LoadRecord:
    """What a load step stored of one VM's row (``load_json``): its window's coverage by the
    others' load, its clock, why it is excluded, its host and that host's busiest NIC."""

    stored: Mapping[str, Any] = field(default_factory=dict)
    excluded: str | None = None  # why the row is left out of the merged figures (None: included)
    loaded: bool | None = None  # every other VM was loaded during its whole window (None: not checked)
    short_ms: float | None = None
    short_of_vm: int | None = None
    start_skew_ms: float | None = None
    window: Mapping[str, Any] | None = None  # measured_from_ms, measured_to_ms, tail_from_ms... on the host clock
    host: str | None = None  # a run across several hosts: the host it ran on
    nic: NicRecord | None = None  # that host's busiest interface over the round

    @classmethod
    def from_row(cls, stored: Mapping[str, Any] | None) -> "LoadRecord":
        data = dict(stored or {}) if isinstance(stored, Mapping) else {}
        why = data.get("excluded")
        return cls(data, excluded=str(why) if why else None, loaded=data.get("loaded"), short_ms=data.get("short_ms"),
                   short_of_vm=data.get("short_of_vm"), start_skew_ms=data.get("start_skew_ms"),
                   window=data.get("window") if isinstance(data.get("window"), Mapping) else None,
                   host=data.get("host"), nic=NicRecord.from_row(data.get("nic")))

    @property
    def measured_from_ms(self) -> float | None:
        return None if self.window is None else self.window.get("measured_from_ms")


NO_LOAD = LoadRecord()


@dataclass(frozen=True)
class Telemetry:
    """The samplers' means over one measurement (:func:`vmbench.telemetry.sampler.summary`),
    None where a series did not have it: the device under fio and the CPUs of the side fio ran
    on; a ZFS pool's MB/s, waits, vdevs, scan, txg timeout, ARC and the volume's compression;
    a Ceph pool's MB/s and ops and its OSDs' latency; for a guest run, the host's device and
    CPU."""

    read_mb_s: float | None = None
    write_mb_s: float | None = None
    cpu_busy: float | None = None
    cpu_idle: float | None = None
    dev_util_pct: float | None = None
    dev_await_ms: float | None = None
    host_dev_util_pct: float | None = None
    host_dev_await_ms: float | None = None
    pool_read_mb_s: float | None = None
    pool_write_mb_s: float | None = None
    pool_read_ops: float | None = None
    pool_write_ops: float | None = None
    pool_wait_ms: Mapping[str, float] | None = None  # total_read, disk_write, syncq_read...
    vdev_write_mb_s: Mapping[str, float] | None = None  # by vdev name
    scan: str | None = None
    txg_timeout_s: float | None = None
    arc_hit_ratio: float | None = None
    arc_size_mb: float | None = None
    compression: str | None = None
    compressratio: float | None = None
    logicalused_bytes: float | None = None
    used_bytes: float | None = None
    osd_commit_ms: float | None = None
    osd_apply_ms: float | None = None
    host_dev_read_mb_s: float | None = None
    host_dev_write_mb_s: float | None = None
    host_cpu_busy: float | None = None
    host_cpu_idle: float | None = None

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any] | None) -> "Telemetry | None":
        """The summary as a record; None when it has nothing (nothing was sampled)."""
        if not summary:
            return None
        return cls(**{k: v for k, v in summary.items() if k in _TELEMETRY_FIELDS})


_TELEMETRY_FIELDS = frozenset(f.name for f in fields(Telemetry))


# ---- a measurement --------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    """One stored measurement (a ``measurements`` row) as every schema version stored it;
    ``cell`` is its cell's name.  ``telemetry``, ``qemu_cpu`` (the QEMU process's CPU row,
    :meth:`vmbench.telemetry.qemu_cpu.CpuPerIo.to_json`) and ``shared_from`` (the cell of the
    same VM whose raw disk it is) are the report's, attached as a new record."""

    side: str
    layer: str
    job: str
    repeat: int = 1
    cell: str | None = None
    stack: str | None = None
    vm: int = 0
    load_step: int = 0
    host: str = ""
    id: int = 0
    run_id: int = 0
    cell_id: int | None = None
    boot_id: int | None = None
    depth: int = 0
    job_params: JobParams = field(default_factory=JobParams)
    job_hash: str = ""
    sync: bool = False
    target: str = ""
    settings: Settings = field(default_factory=Settings)
    accelerator: str | None = None
    started_at: str = ""
    iops: float = 0.0
    bw_bytes: float = 0.0
    clat: Histogram = field(default_factory=Histogram)
    attempt: int = 1
    role: str | None = None
    load: LoadRecord = NO_LOAD
    argv_json: str = field(default="[]", repr=False, compare=False)
    fio_json: str = field(default="{}", repr=False, compare=False)
    telemetry: Telemetry | None = None
    qemu_cpu: Mapping[str, Any] | None = None
    shared_from: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "Measurement":
        """A stored row (``X_json`` columns as text, or decoded under ``X``; ``cell`` the cell's
        name, ``telemetry`` a summary, where a reader joined them)."""
        params = row.get("job_params_json", row.get("job_params"))
        bins = row.get("clat_bins_json", row.get("clat_bins"))
        return cls(
            side=str(row.get("side") or ""), layer=str(row.get("layer") or ""), job=str(row.get("job") or ""),
            repeat=int(row.get("repeat") or 0), cell=row.get("cell"),
            stack=row.get("stack"), vm=int(row.get("vm") or 0), load_step=int(row.get("load_step") or 0),
            host=str(row.get("host") or ""), id=int(row.get("id") or 0), run_id=int(row.get("run_id") or 0),
            cell_id=row.get("cell_id"), boot_id=row.get("boot_id"), depth=int(row.get("depth") or 0),
            job_params=_job_params(params) if isinstance(params, str) else JobParams.from_row(params),
            job_hash=str(row.get("job_hash") or ""), sync=bool(row.get("sync")), target=str(row.get("target") or ""),
            settings=settings_of_row(row), accelerator=row.get("accelerator"), started_at=str(row.get("started_at") or ""),
            iops=float(row.get("iops") or 0.0), bw_bytes=float(row.get("bw_bytes") or 0.0),
            clat=Histogram.from_text(bins) if isinstance(bins, str) else Histogram.from_json(bins or {}),
            attempt=int(row.get("attempt") or 1), role=row.get("role"), load=LoadRecord.from_row(decoded(row, "load", {})),
            argv_json=_text(row, "argv", "[]"),
            fio_json=_text(row, "fio"), telemetry=_telemetry(row.get("telemetry")),
            qemu_cpu=row.get("qemu_cpu") if isinstance(row.get("qemu_cpu"), Mapping) else None,
            shared_from=row.get("shared_from"))

    def to_row(self) -> dict[str, Any]:
        """The ``measurements`` columns of the current schema (but ``id``): the percentile
        columns written from the histogram."""
        p50, p95, p99, p999 = self.percentiles_ns
        return dict(run_id=self.run_id, cell_id=self.cell_id, side=self.side, stack=self.stack, layer=self.layer,
                    depth=self.depth, job=self.job, job_params_json=dict(self.job_params.stored), job_hash=self.job_hash,
                    sync=self.sync, repeat=self.repeat, target=self.target, argv_json=list(self.argv),
                    settings_json=dict(self.settings), accelerator=self.accelerator, started_at=self.started_at,
                    iops=self.iops, bw_bytes=self.bw_bytes, p50_ns=p50, p95_ns=p95, p99_ns=p99, p999_ns=p999,
                    clat_bins_json=self.clat.to_json(), fio_json=self.fio_json, boot_id=self.boot_id, attempt=self.attempt,
                    vm=self.vm, load_step=self.load_step, role=self.role, load_json=dict(self.load.stored), host=self.host)

    @functools.cached_property
    def key(self) -> MeasurementKey:
        return MeasurementKey(self.side, self.cell, self.stack, self.layer, self.job, self.repeat, self.vm, self.load_step)

    @property
    def group(self) -> MeasurementKey:
        """The key of the group whose repeats are combined (:meth:`MeasurementKey.group`)."""
        return self.key.group()

    @functools.cached_property
    def percentiles_ns(self) -> tuple[int | None, ...]:
        """p50, p95, p99 and p99.9 of the histogram (:data:`~vmbench.fio.histogram.PERCENTILES`)."""
        return tuple(self.clat.percentiles(PERCENTILES))

    def percentile_ms(self, p: float) -> float | None:
        """One of :data:`~vmbench.fio.histogram.PERCENTILES` in ms, from the histogram."""
        ns = self.percentiles_ns[PERCENTILES.index(p)]
        return None if ns is None else ns / 1e6

    @functools.cached_property
    def fio(self) -> Mapping[str, Any]:
        """fio's whole output as stored (a JSON document fio wrote), decoded when first read."""
        got = json.loads(self.fio_json) if self.fio_json else {}
        return got if isinstance(got, Mapping) else {}

    @property
    def argv(self) -> tuple[str, ...]:
        return tuple(json.loads(self.argv_json) if self.argv_json else ())

    @property
    def excluded(self) -> str | None:
        """Why a load step's row is left out of every merged figure (None: included)."""
        return self.load.excluded


def _telemetry(value: Any) -> Telemetry | None:
    if isinstance(value, Telemetry) or value is None:
        return value
    return Telemetry.from_summary(value) if isinstance(value, Mapping) else None


# ---- cells, boots, crypto, series -------------------------------------------------------------


@dataclass(frozen=True)
class CellRecord:
    """A stored cell: a VM configuration (or a host-only storage variant) and whether it was
    measured; ``host_cell`` (the cell its host reference is stored under) is the plan's."""

    name: str
    id: int | None = None
    run_id: int = 0
    boot_id: int | None = None
    seq: int = 0
    settings: Settings = field(default_factory=Settings)
    changed: tuple[str, ...] = ()
    stacks: tuple[str, ...] = ()
    valid: bool = True  # as stored (SQLite's 1 or 0), which the cells table shows as it is
    problems: tuple[str, ...] = ()
    evidence: Mapping[str, Any] = field(default_factory=dict)  # what took effect, as read back (the run's checks)
    host_cell: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any], host_cell: str | None = None) -> "CellRecord":
        return cls(name=str(row["name"]), id=row.get("id"), run_id=int(row.get("run_id") or 0), boot_id=row.get("boot_id"),
                   seq=int(row.get("seq") or 0), settings=settings_of_row(row),
                   changed=tuple(decoded(row, "changed", ())), stacks=tuple(decoded(row, "stacks", ())),
                   valid=row.get("valid", True), problems=tuple(decoded(row, "problems", ())),
                   evidence=decoded(row, "evidence", {}), host_cell=row.get("host_cell", host_cell))

    def to_row(self) -> dict[str, Any]:
        return dict(run_id=self.run_id, boot_id=self.boot_id, seq=self.seq, name=self.name, settings_json=dict(self.settings),
                    changed_json=list(self.changed), stacks_json=list(self.stacks), valid=self.valid,
                    problems_json=list(self.problems), evidence_json=dict(self.evidence))

    @property
    def raw_measured_in(self) -> str | None:
        """The cell of the same VM its raw disk was measured in (cells of one boot share it)."""
        got = self.evidence.get("raw_measured_in")
        return str(got) if got else None

    @property
    def layers(self) -> list[Mapping[str, Any]]:
        """How each of its stacks' layers was built, as the run recorded it (stack, layer,
        seconds, commands, device, target)."""
        got = self.evidence.get("layers")
        return [l for l in got if isinstance(l, Mapping)] if isinstance(got, list) else []

    @property
    def volumes(self) -> list["VolumeRecord"]:
        """Its scratch and reference volumes as read back at creation."""
        storage = self.evidence.get("storage")
        vols = storage.get("volumes") if isinstance(storage, Mapping) else None
        return [VolumeRecord.from_row(v) for v in vols.values() if isinstance(v, Mapping)] if isinstance(vols, Mapping) else []


@dataclass(frozen=True)
class VolumeRecord:
    """A cell's scratch or reference volume as the run read it back: on ZFS its dataset
    (``zfs_name``), each property's value (``readback``: ``zfs get``) and where it comes from
    (``sources``: "local", "default", "inherited from DATASET"...)."""

    zfs_name: str | None = None
    readback: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, stored: Mapping[str, Any]) -> "VolumeRecord":
        name, readback, sources = stored.get("zfs_name"), stored.get("readback"), stored.get("sources")
        return cls(str(name) if name else None, readback if isinstance(readback, Mapping) else {},
                   sources if isinstance(sources, Mapping) else {})


@dataclass(frozen=True)
class BootRecord:
    """A stored boot: one VM as started, with what the guest and the hypervisor reported."""

    id: int = 0
    run_id: int = 0
    seq: int = 0
    vm_key: str = ""
    settings: Settings = field(default_factory=Settings)
    domain_name: str = ""
    accelerator: str | None = None
    guest: Mapping[str, Any] = field(default_factory=dict)  # the guest's facts (kernel, fio_version...) and the hypervisor's status
    boot_seconds: float | None = None
    started_at: str = ""
    attempt: int = 1
    load_step: int = 0
    vm: int = 0
    domain_xml: str | None = field(default=None, repr=False)  # the VM's configuration as created (the driver's native form)
    live_xml: str | None = field(default=None, repr=False)  # and as read back from the running VM
    qemu_cmdline: tuple[str, ...] | None = field(default=None, repr=False)  # the QEMU process's argv, as read back

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "BootRecord":
        cmdline = decoded(row, "qemu_cmdline", None)
        return cls(id=int(row.get("id") or 0), run_id=int(row.get("run_id") or 0), seq=int(row.get("seq") or 0),
                   vm_key=str(row.get("vm_key") or ""), settings=settings_of_row(row), domain_name=str(row.get("domain_name") or ""),
                   accelerator=row.get("accelerator"), guest=decoded(row, "guest", {}), boot_seconds=row.get("boot_seconds"),
                   started_at=str(row.get("started_at") or ""), attempt=int(row.get("attempt") or 1),
                   load_step=int(row.get("load_step") or 0), vm=int(row.get("vm") or 0), domain_xml=row.get("domain_xml"),
                   live_xml=row.get("live_xml"), qemu_cmdline=None if cmdline is None else tuple(cmdline))

    def to_row(self) -> dict[str, Any]:
        """The ``boots`` columns of the current schema (but ``id``)."""
        return dict(run_id=self.run_id, seq=self.seq, vm_key=self.vm_key, settings_json=dict(self.settings),
                    domain_name=self.domain_name, accelerator=self.accelerator, domain_xml=self.domain_xml, live_xml=self.live_xml,
                    qemu_cmdline_json=None if self.qemu_cmdline is None else list(self.qemu_cmdline), guest_json=dict(self.guest),
                    boot_seconds=self.boot_seconds, started_at=self.started_at, attempt=self.attempt, load_step=self.load_step,
                    vm=self.vm)

    @property
    def guest_fio(self) -> str | None:
        """The guest's fio version (None: not read)."""
        got = self.guest.get("fio_version")
        return None if got is None else str(got)

    @property
    def guest_kernel(self) -> str | None:
        got = self.guest.get("kernel")
        return None if got is None else str(got)

    @property
    def running_qemu(self) -> str | None:
        """The QEMU a Proxmox VM ran (``running-qemu`` of its status/current)."""
        status = self.guest.get("pve_status")
        got = status.get("running-qemu") if isinstance(status, Mapping) else None
        return str(got) if got else None


@dataclass(frozen=True)
class CryptoRecord:
    """A stored cryptsetup benchmark: one cipher on one CPU (the host's, or a guest's model)."""

    side: str
    cpu: str
    cipher: str
    key_bits: int
    aes_flag: bool | None = None  # as stored (SQLite's 1 or 0), which the crypto table shows as it is
    encrypt_mib_s: float | None = None
    decrypt_mib_s: float | None = None
    error: str | None = None
    id: int = 0
    run_id: int = 0
    boot_id: int | None = None
    attempt: int = 1

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "CryptoRecord":
        return cls(side=str(row["side"]), cpu=str(row["cpu"]), cipher=str(row["cipher"]), key_bits=int(row["key_bits"]),
                   aes_flag=row.get("aes_flag"), encrypt_mib_s=row.get("encrypt_mib_s"),
                   decrypt_mib_s=row.get("decrypt_mib_s"), error=row.get("error"), id=int(row.get("id") or 0),
                   run_id=int(row.get("run_id") or 0), boot_id=row.get("boot_id"), attempt=int(row.get("attempt") or 1))

    def to_row(self) -> dict[str, Any]:
        """The ``crypto`` columns of the current schema (but ``id``)."""
        return dict(run_id=self.run_id, side=self.side, boot_id=self.boot_id, cpu=self.cpu, aes_flag=self.aes_flag,
                    cipher=self.cipher, key_bits=self.key_bits, encrypt_mib_s=self.encrypt_mib_s,
                    decrypt_mib_s=self.decrypt_mib_s, error=self.error, attempt=self.attempt)

    @property
    def measured(self) -> bool:
        return self.encrypt_mib_s is not None


@dataclass(frozen=True)
class SeriesRecord:
    """A stored time series (a ``telemetry`` row) from ``source`` ("fio-iops", "disk", "zpool",
    "qemu-cpu"...), of a measurement or of the whole run (``measurement_id`` None), as the
    sampler or fio's logs wrote it."""

    source: str
    series: Any
    measurement_id: int | None = None
    id: int = 0
    run_id: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "SeriesRecord":
        return cls(source=str(row["source"]), series=decoded(row, "series", None), measurement_id=row.get("measurement_id"),
                   id=int(row.get("id") or 0), run_id=int(row.get("run_id") or 0))

    def to_row(self) -> dict[str, Any]:
        """The ``telemetry`` columns of the current schema (but ``id``)."""
        return dict(run_id=self.run_id, measurement_id=self.measurement_id, source=self.source, series_json=self.series)
