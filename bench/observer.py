#!/usr/bin/env python3
"""The observer effect: what vmbench's own work beside fio costs the figure it measures.

For each target it runs the same fio job three ways, in turn, repeated (the order rotated
every repeat), and prints the ratios of the medians side by side:

* **vmbench**: fio as a run's measurement calls it (:func:`vmbench.fio.runner.run_fio`, with the
  progress printed, fio's status read back for stalls, the device and CPU samplers on the
  side and, for a guest, on the host, the QEMU process's CPU snapshots and perf where it
  counts, and on RBD the pool's counters and the health watch);
* **vmbench, telemetry off**: the same with ``telemetry: off`` (no sampler, no Ceph readings,
  no QEMU CPU cost; fio's status reads and the health watch stay);
* **by hand**: the very argv vmbench ran (its ``env`` prefix on RBD), started with nothing
  around it: ``subprocess`` on the host; in the guest one ``guest-exec`` through the agent,
  asked about only once the job's time is up, then every second.

Targets: ``dir`` (the host reference on a file in the dir pool's filesystem, and the guest on
its virtio-blk scratch disk: one TCG boot, cache none, aio native, as a run's VM), ``rbd`` (the
host reference through librbd, on a one-node Ceph cluster started here as the tests' is, with
a pool of size 1).  Jobs: a 4k random write and a 4k random read at QD4 (the read's target
preconditioned once, as a run does).

    .venv/bin/python bench/observer.py [--targets dir-host,dir-guest,rbd-host] [--repeats 5] [--runtime 8]

Goal: vmbench / by hand = 1.00 +- 0.05, and telemetry's cost (1 - on/off) under 2%.  Every
figure is a real fio run made here; nothing is kept (the VM, its volumes, the cluster are
removed on errors too).  Needs root, libvirtd and the debian12 image (``make demo``), and
for rbd Debian's Ceph packages (scripts/bootstrap installs them).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vmbench.cli.common import ConsoleProgress  # noqa: E402
from vmbench.drivers import make_driver  # noqa: E402
from vmbench.drivers.base import VmRequest  # noqa: E402
from vmbench.fio.job import FioJob, fio_env, to_precondition  # noqa: E402
from vmbench.fio.result import last_json, parse_fio_json  # noqa: E402
from vmbench.fio.runner import FioRequest, Sampling, precondition, run_fio  # noqa: E402
from vmbench.guest.disk import find_scratch  # noqa: E402
from vmbench.images import current_image  # noqa: E402
from vmbench.progress import NullProgress, Progress  # noqa: E402
from vmbench.run.cpucost import CpuCost  # noqa: E402
from vmbench.scenario.model import CephConfig, Hypervisor, VmConfig  # noqa: E402
from vmbench.settings import Accel, Aio, Bus, Cache  # noqa: E402
from vmbench.storage.cephcli import client_args  # noqa: E402
from vmbench.storage.rbd import rbd_host_target, volume_target  # noqa: E402
from vmbench.telemetry.ceph import CephPool  # noqa: E402
from vmbench.transport.local import LocalTransport  # noqa: E402

WAYS = ("vmbench", "telemetry off", "by hand")
GUEST_WORKDIR = "/run/vmbench"


def quiet() -> Progress:
    """vmbench's progress as the CLI prints it (what the CLI does for each line stays), to /dev/null."""
    return ConsoleProgress(stream=open(os.devnull, "w"))


def jobs(runtime: float) -> list[FioJob]:
    return [FioJob(name="4k-randwrite", rw="randwrite", bs=4096, iodepth=4, size=256 << 20, runtime=runtime, ramp=2),
            FioJob(name="4k-randread", rw="randread", bs=4096, iodepth=4, size=256 << 20, runtime=runtime, ramp=2)]


# ---- one measurement, three ways ------------------------------------------------------------------


class Target:
    """Where fio runs: a side, its target, vmbench's extras for that side, and how a hand runs fio there."""

    def __init__(self, name: str, side, target: str, workdir: str, *, slow: bool = False, host_side=None,
                 host_workdir: str = "", host_target: str | None = None, ceph: CephPool | None = None,
                 cpu: CpuCost | None = None, by_hand: Callable[[list[str], FioJob], float] | None = None) -> None:
        self.name, self.side, self.target, self.workdir = name, side, target, workdir
        self.slow, self.host_side, self.host_workdir, self.host_target = slow, host_side, host_workdir, host_target
        self.ceph, self.cpu = ceph, cpu
        self.by_hand = by_hand or self._host_by_hand
        self.argv: dict[str, list[str]] = {}

    def vmbench(self, job: FioJob, telemetry: bool) -> float:
        """As Measurer._run calls it (the QEMU CPU cost around a guest run with telemetry on)."""
        cpu = self.cpu if telemetry else None
        start = cpu.begin(job.duration) if cpu is not None else None
        sampling = Sampling(telemetry=telemetry, host_side=self.host_side, host_workdir=self.host_workdir,
                            host_target=self.host_target, ceph_pool=self.ceph)
        run = run_fio(self.side, FioRequest(job, self.target, self.workdir, f"{self.name}: {job.name}", slow=self.slow,
                                            sampling=sampling), quiet())
        if cpu is not None:
            cpu.end(start, ios=run.result.iops * (job.ramp + job.runtime))
        self.argv[job.name] = list(run.argv)
        return run.result.iops

    def hand(self, job: FioJob) -> float:
        return self.by_hand(self.argv[job.name], job)

    def _host_by_hand(self, argv: list[str], job: FioJob) -> float:
        out = f"{self.workdir}/hand-{secrets.token_hex(4)}.json"
        argv = [f"--output={out}" if a.startswith("--output=") else a for a in argv]
        try:
            subprocess.run(argv, env={**os.environ, **fio_env(job, self.target)}, check=True, capture_output=True,
                           timeout=job.duration * 4 + 120)
            return parse_fio_json(Path(out).read_text()).iops
        finally:
            for p in Path(self.workdir).glob("hand-*"):
                p.unlink()
            for p in Path(self.workdir).glob("log-*"):
                p.unlink()


def guest_by_hand(agent) -> Callable[[list[str], FioJob], float]:
    """fio in the guest with nothing around it: one guest-exec, its status asked only once the
    job's time is up (then every second), its output read back after."""

    def run(argv: list[str], job: FioJob) -> float:
        out = f"{GUEST_WORKDIR}/hand-{secrets.token_hex(4)}.json"
        argv = [f"--output={out}" if a.startswith("--output=") else a for a in argv]
        pid = int(agent.channel({"execute": "guest-exec", "arguments": {"path": argv[0], "arg": argv[1:],
                                                                         "capture-output": True}}, 30)["pid"])
        time.sleep(job.duration)
        deadline = time.monotonic() + job.duration * 4 + 120
        while True:
            st = agent.channel({"execute": "guest-exec-status", "arguments": {"pid": pid}}, 30)
            if st.get("exited"):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"fio by hand in the guest did not end: {argv}")
            time.sleep(1.0)
        if st.get("exitcode"):
            raise SystemExit(f"fio by hand in the guest failed ({st.get('exitcode')}): {argv}")
        iops = parse_fio_json(last_json(agent.read_file(out).decode())).iops
        agent.run(["sh", "-c", f"rm -f {GUEST_WORKDIR}/hand-* {GUEST_WORKDIR}/log-*"], timeout=60)
        return iops

    return run


def measure(t: Target, js: list[FioJob], repeats: int, say: Callable[[str], None]) -> dict[str, dict[str, list[float]]]:
    """Every job ``repeats`` times each way, the order rotated each repeat (vmbench first, so
    the by-hand run has its argv); {job: {way: [IOPS...]}}."""
    got: dict[str, dict[str, list[float]]] = {j.name: {w: [] for w in WAYS} for j in js}
    for j in js:
        pre = to_precondition([j])
        if pre is not None:
            precondition(t.side, pre, t.target, t.workdir, slow=t.slow)
        t.vmbench(j, True)  # the argv, and a warm-up
        for r in range(repeats):
            order = list(WAYS[r % 3:] + WAYS[:r % 3])
            for way in order:
                iops = t.vmbench(j, True) if way == "vmbench" else t.vmbench(j, False) if way == "telemetry off" else t.hand(j)
                got[j.name][way].append(iops)
                say(f"{t.name} {j.name} #{r + 1} {way}: {iops:,.0f} IOPS")
    return got


# ---- the targets ------------------------------------------------------------------------------------


@contextlib.contextmanager
def dir_host(work: Path) -> Iterator[Target]:
    """A 256 MiB file on the filesystem of libvirt's dir pool (/var/lib/vmbench), written once."""
    d = Path(tempfile.mkdtemp(prefix="vmbtest-observer-", dir="/var/lib/vmbench" if Path("/var/lib/vmbench").is_dir() else None))
    try:
        f = d / "target.raw"
        subprocess.run(["fallocate", "-l", str(256 << 20), str(f)], check=True)
        yield Target("dir host", LocalTransport(), str(f), str(work))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def dir_guest(work: Path, progress: Progress) -> Iterator[Target]:
    """vmbench's own VM on the dir pool (TCG, 1 vCPU, virtio-blk, cache none, aio native), booted once."""
    image = current_image("debian12")
    if image is None:
        raise SystemExit("the debian12 image is not built: run `make demo` (or `vmbench images build`)")
    driver = make_driver(Hypervisor(accel=Accel.TCG))
    vm = replace(VmConfig(), memory_mib=768, vcpus=1, bus=Bus.VIRTIO_BLK, cache=Cache.NONE, aio=Aio.NATIVE)
    tag = "r" + secrets.token_hex(4)
    request = VmRequest(seq=1, vm=vm, scratch_size=512 << 20, cells=("observer",))
    res = None
    try:
        driver.prepare(image=image, accel=Accel.TCG, cpu_models=set(), cpu_modes=set(), progress=progress, vms=[vm])
        res = driver.new_resources(tag, request)
        driver.create_vm(tag, request, res)
        guest = driver.boot(tag, request, res, progress)
        gt = guest.transport
        gt.run(["mkdir", "-p", GUEST_WORKDIR], timeout=60)
        disk = find_scratch(gt, res.scratch_serial)
        pid = guest.applied().qemu_pid
        cpu = CpuCost(driver.host, pid, gt) if isinstance(pid, int) else None
        if cpu is not None:
            cpu.measure_idle()
        yield Target("dir guest", gt, disk.path, GUEST_WORKDIR, slow=True, host_side=driver.host, host_workdir=str(work),
                     host_target=res.scratch_path, cpu=cpu, by_hand=guest_by_hand(gt))
    finally:
        if res is not None:
            driver.remove_vm(res)
        driver.close()


@contextlib.contextmanager
def rbd_host(work: Path) -> Iterator[Target]:
    """librbd on a 256 MiB image of a one-node cluster started here (tests/ceph.py), the cache off (cache=none)."""
    from tests.ceph import CephCluster

    base = Path(tempfile.mkdtemp(prefix="vmbtest-observer-ceph-", dir="/var/tmp"))
    cluster = CephCluster.start(base / "cluster")
    try:
        cfg = CephConfig(pool=cluster.pool, conf=str(cluster.conf_path), user=cluster.user)
        name = "vmbtest-observer.raw"
        cluster.rbd("create", "--size", "512M", f"{cluster.pool}/vmbtest-observer")
        target = rbd_host_target(str(volume_target(cfg, name)), Cache.NONE)
        yield Target("rbd host", LocalTransport(), target, str(work),
                     ceph=CephPool(("ceph", *client_args(cfg)), cfg.pool))
    finally:
        cluster.stop(discard_block=True)
        shutil.rmtree(base, ignore_errors=True)


# ---- the table --------------------------------------------------------------------------------------


def ratio_line(name: str, job: str, got: dict[str, list[float]]) -> str:
    med = {w: statistics.median(v) for w, v in got.items()}
    cv = {w: (statistics.stdev(v) / statistics.mean(v) * 100 if len(v) > 1 else 0.0) for w, v in got.items()}
    vs_hand = med["vmbench"] / med["by hand"]
    on_off = med["vmbench"] / med["telemetry off"]
    pairs = [a / b for a, b in zip(got["vmbench"], got["by hand"])]
    return (f"| {name} | {job} | {med['vmbench']:,.0f} ({cv['vmbench']:.0f}%) | {med['telemetry off']:,.0f} ({cv['telemetry off']:.0f}%) "
            f"| {med['by hand']:,.0f} ({cv['by hand']:.0f}%) | **{vs_hand:.3f}** ({min(pairs):.2f}-{max(pairs):.2f}) "
            f"| **{on_off:.3f}** |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="dir-host,rbd-host,dir-guest")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--runtime", type=float, default=8.0)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the host's fio on the pool's filesystem and libvirt's qemu:///system need it")
    js = jobs(args.runtime)
    work = Path(tempfile.mkdtemp(prefix="vmbtest-observer-work-"))
    results: list[tuple[str, str, dict[str, list[float]]]] = []
    started = time.monotonic()
    say = lambda line: print(f"[{time.monotonic() - started:5.0f}s] {line}", file=sys.stderr, flush=True)  # noqa: E731
    makers = {"dir-host": lambda: dir_host(work), "dir-guest": lambda: dir_guest(work, NullProgress()),
              "rbd-host": lambda: rbd_host(work)}
    try:
        for name in args.targets.split(","):
            with makers[name]() as t:
                for job, got in measure(t, js, args.repeats, say).items():
                    results.append((t.name, job, got))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"\nmedians of {args.repeats} runs each way (IOPS, CV), {args.runtime:g} s + 2 s ramp, QD4; load average {' '.join(load)}")
    print("| target | job | vmbench | telemetry off | by hand | vmbench / by hand (range of pairs) | on / off |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, job, got in results:
        print(ratio_line(name, job, got))
    print("\ngoal: vmbench / by hand = 1.00 +- 0.05; telemetry's cost (1 - on/off) under 2%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
