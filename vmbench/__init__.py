"""vmbench: host-vs-guest disk I/O gaps, layer by layer, from real fio runs."""

__version__ = "0.1.0"
