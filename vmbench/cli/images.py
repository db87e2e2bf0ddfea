"""``vmbench images``: build and list the guest template images, and push one to a Proxmox
VE node as vmbench's own template (``vmbench images push SCENARIO``)."""

from __future__ import annotations

import argparse

from ..errors import UsageError


def cmd_images_build(args: argparse.Namespace) -> int:
    from ..images import ensure_image
    from .common import ConsoleProgress

    image = ensure_image(args.name, force=args.force, progress=ConsoleProgress())
    print(f"{image.name}: {image.directory} (hash {image.hash[:12]})")
    return 0


def cmd_images_list(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from ..images import current_image, list_images, recipe_names

    current = {}
    for n in recipe_names():
        img = current_image(n)
        if img:
            current[n] = img.hash
    rows = [[i.name, i.hash[:12], "current" if current.get(i.name) == i.hash else "outdated", i.manifest.get("built_at", "?"),
             i.manifest.get("kernel_version", "?"), str(i.directory)] for i in list_images()]
    print(tabulate(rows, headers=["recipe", "hash", "state", "built", "kernel", "directory"], tablefmt="simple"))
    missing = [n for n in recipe_names() if n not in current]
    for n in missing:
        print(f"{n}: not built for its current recipe (vmbench images build {n})")
    return 0


def cmd_images_push(args: argparse.Namespace) -> int:
    """Build the scenario's image if needed, make it a disk that boots by itself, and make
    (or keep) vmbench's template from it on the scenario's Proxmox node and storage (on each
    node of a run across several: a template per node, which local storage needs)."""
    from ..drivers import make_driver
    from ..drivers.proxmox.driver import ProxmoxDriver
    from ..drivers.proxmox.template import TemplateIdentity
    from ..images import ensure_image
    from ..images.bootdisk import LAYOUT_VERSION, ensure_boot_disk
    from ..scenario import load_scenario
    from ..settings import DriverName
    from .common import ConsoleProgress, on_hosts

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


def add_parser(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser("images", help="guest template images (build, list, push to Proxmox VE)")
    isub = sp.add_subparsers(dest="images_command", metavar="ACTION")
    isub.required = True
    ib = isub.add_parser("build", help="build a template image if missing or its recipe changed")
    ib.add_argument("name", nargs="?", default="debian12")
    ib.add_argument("--force", action="store_true", help="rebuild even if current")
    ib.set_defaults(func=cmd_images_build)
    il = isub.add_parser("list", help="list built images")
    il.set_defaults(func=cmd_images_list)
    ip = isub.add_parser("push", help="make vmbench's template on a Proxmox scenario's node and storage "
                                      "(building the image if needed); kept while its recipe is unchanged")
    ip.add_argument("scenario", help="a scenario with driver: proxmox (its node, storage, template name and SSH)")
    ip.add_argument("--replace", action="store_true",
                    help="replace vmbench's template made from an older recipe (never a VM vmbench did not make)")
    ip.add_argument("--import-storage", metavar="STORAGE",
                    help="the node's storage to upload the disk into (content 'import'; default: one that takes imports)")
    ip.set_defaults(func=cmd_images_push)
