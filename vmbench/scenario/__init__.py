from .loader import load_scenario, parse_scenario
from .model import Cell, CpuConfig, FilesystemLayer, LuksLayer, LvmLayer, PartitionLayer, Scenario, Stack, Target, VmConfig

__all__ = [
    "load_scenario", "parse_scenario", "Cell", "CpuConfig", "FilesystemLayer", "LuksLayer", "LvmLayer",
    "PartitionLayer", "Scenario", "Stack", "Target", "VmConfig",
]
