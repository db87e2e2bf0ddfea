"""``vmbench setup proxmox [SCENARIO]``: the commands that give vmbench a Proxmox VE API
token with only the rights it needs (a role per ACL path, a user, a privilege-separated
token, the ACLs, the import content), from the rights table
(:mod:`vmbench.drivers.proxmox.rights`).  Nothing is read from the node: for a scenario, its
token id, node, storage and the steps its storage section makes (temporary storage entries,
an rbd storage); without one, the example of docs/proxmox.md."""

from __future__ import annotations

import argparse

from ..errors import UsageError


def cmd_setup_proxmox(args: argparse.Namespace) -> int:
    from ..drivers.proxmox.recipe import ALL_STEPS, DOCS_SETUP, DOCS_TOKEN, recipe
    from ..drivers.proxmox.rights import MAJORS, Setup, run_steps

    majors = (int(args.pve),) if args.pve else MAJORS
    if args.scenario is None:
        setup = DOCS_SETUP if args.import_storage is None else Setup(**{**DOCS_SETUP.__dict__, "import_storage": args.import_storage})
        print(recipe(setup, DOCS_TOKEN, majors=majors), end="")
        return 0
    from ..scenario import load_scenario

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


def add_parser(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser("setup", help="print the commands that set a hypervisor up for vmbench (proxmox: the API token)")
    ssub = sp.add_subparsers(dest="setup_command", metavar="HYPERVISOR")
    ssub.required = True
    pp = ssub.add_parser("proxmox", help="the pveum/pvesm commands for a Proxmox VE API token with only the rights "
                                         "vmbench needs (run them as root on a node; nothing is read from it)")
    pp.add_argument("scenario", nargs="?", help="a scenario with driver: proxmox (its token id, node, storage); "
                                                "default: docs/proxmox.md's example")
    pp.add_argument("--pve", choices=["8", "9"], help="the PVE major version (default: both; they differ in the guest "
                                                      "agent's privilege)")
    pp.add_argument("--import-storage", metavar="STORAGE", help="the storage vmbench images push uploads into "
                                                                "(default: local)")
    pp.set_defaults(func=cmd_setup_proxmox)
