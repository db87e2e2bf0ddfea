"""What the layers below fio did while it ran (METHOD rule 8).

``sampler.py``: the per-second disk and CPU sampler started beside fio on any transport,
and the parsing of what it wrote (pure); ``zfs.py``: the pool (``zpool iostat``) and ARC
series and the ZFS state read with them (pure parsers); ``qemu_cpu.py``: snapshots of a QEMU
process's threads on the host and what a run cost per thread class, per I/O (pure).
"""
