from . import backends  # noqa: F401 - registers the built-in storage backends, before anything asks one
from .loader import load_scenario, parse_scenario
from .model import Cell, CpuConfig, FilesystemLayer, LuksLayer, LvmLayer, PartitionLayer, Stack, Target, VmConfig
from .spec import Scenario

__all__ = [
    "load_scenario", "parse_scenario", "Cell", "CpuConfig", "FilesystemLayer", "LuksLayer", "LvmLayer",
    "PartitionLayer", "Scenario", "Stack", "Target", "VmConfig",
]
