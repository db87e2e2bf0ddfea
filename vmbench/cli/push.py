"""``vmbench images push SCENARIO``: vmbench's template on a Proxmox VE scenario's node and
storage, made from its guest image (built if needed) as a disk that boots by itself."""

from __future__ import annotations

import argparse

from ..drivers import make_driver
from ..drivers.proxmox.driver import ProxmoxDriver
from ..drivers.proxmox.template import TemplateIdentity
from ..errors import UsageError
from ..images import ensure_image
from ..images.bootdisk import LAYOUT_VERSION, ensure_boot_disk
from ..scenario import load_scenario
from ..settings import DriverName
from .common import ConsoleProgress, on_hosts


def cmd_images_push(args: argparse.Namespace) -> int:
    """Build the scenario's image if needed, make it a disk that boots by itself, and make
    (or keep) vmbench's template from it on the scenario's Proxmox node and storage (on each
    node of a run across several: a template per node, which local storage needs)."""
    s = load_scenario(args.scenario)
    if s.hypervisor.driver is not DriverName.PROXMOX:
        raise UsageError(f"{args.scenario} runs on {s.hypervisor.driver.value}, not proxmox: `vmbench images push` makes a "
                         "Proxmox VE template", "libvirt runs place vmbench's image on their host themselves")
    progress = ConsoleProgress()
    s = on_hosts(s, progress)  # nodes: all: a template for each online node
    image = ensure_image(s.template, progress=progress)
    disk = ensure_boot_disk(image, progress)
    identity = TemplateIdentity(image.name, image.hash, LAYOUT_VERSION)
    # every node of the scenario: on local storage each node clones from its own template
    for node in s.hypervisor.members:
        driver = make_driver(node, s.storage)
        assert isinstance(driver, ProxmoxDriver)
        try:
            result = driver.push_template(identity, disk, replace=args.replace, import_storage=args.import_storage,
                                          progress=progress)
        finally:
            driver.close()
        what = "made" if result.made else "kept (current)"
        if result.replaced is not None:
            what += f", replacing VM {result.replaced}"
        where = node.proxmox.node if node.proxmox else "?"
        if result.node and result.node != where:
            what += f", on node {result.node}'s shared storage (node {where} clones it with target)"
        print(f"template {result.vmid} ({result.name}) for node {where}: vmbench's {result.identity.short}, {what}")
    return 0

