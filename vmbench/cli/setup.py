"""``vmbench setup proxmox [SCENARIO]``: the commands that give vmbench a Proxmox VE API
token with only the rights it needs (a role per ACL path, a user, a privilege-separated
token, the ACLs, the import content), from the rights table
(:mod:`vmbench.drivers.proxmox.rights`).  Nothing is read from the node: for a scenario, its
token id, node, storage and the steps its storage section makes (temporary storage entries,
an rbd storage); without one, the example of docs/proxmox.md."""

from __future__ import annotations

import argparse

from ..drivers.proxmox.recipe import ALL_STEPS, DOCS_SETUP, DOCS_TOKEN, recipe
from ..drivers.proxmox.rights import MAJORS, Setup, run_steps
from ..errors import UsageError
from ..scenario import load_scenario


def cmd_setup_proxmox(args: argparse.Namespace) -> int:
    majors = (int(args.pve),) if args.pve else MAJORS
    if args.scenario is None:
        setup = DOCS_SETUP if args.import_storage is None else Setup(**{**DOCS_SETUP.__dict__, "import_storage": args.import_storage})
        print(recipe(setup, DOCS_TOKEN, majors=majors), end="")
        return 0
    s = load_scenario(args.scenario)
    pve = s.hypervisor.proxmox
    if pve is None:
        raise UsageError(f"{args.scenario} has hypervisor.driver {s.hypervisor.driver.value}, not proxmox",
                         "vmbench setup proxmox prints a Proxmox VE token's setup for a scenario with driver: proxmox")
    vms = [c.vm for c in s.cells]
    pve_type = s.storage.backend.proxmox_type  # as the driver's node reads it (drivers/proxmox/node.py)
    rbd = pve_type == "rbd"
    steps = run_steps(zfs_entries=pve_type == "zfspool" and bool(s.storage.dataset) and any(vm.zfs.volblocksize for vm in vms),
                      krbd_cells=rbd and any(vm.krbd is not None for vm in vms), rbd=rbd)
    setup = Setup(node=pve.node, storage=pve.storage, template_storages=(pve.storage,),
                  import_storage=args.import_storage or "local")
    steps = tuple(dict.fromkeys(steps + ALL_STEPS))
    print(recipe(setup, pve.token_id, steps=steps, majors=majors, scenario=args.scenario), end="")
    return 0


