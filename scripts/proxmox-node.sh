# Sourced by scripts/bootstrap: is this machine a Proxmox VE node?  Then `make demo` and
# `make test` must not install libvirt and Debian's QEMU beside Proxmox's own.
#   is_proxmox_node [ROOT]   true when ROOT (default /) has /etc/pve (pmxcfs), pveversion, or
#                            the proxmox-ve or pve-manager package installed (dpkg's status file)
is_proxmox_node() {
    local root=${1:-}
    root=${root%/}
    [ -d "$root/etc/pve" ] && return 0
    [ -x "$root/usr/bin/pveversion" ] && return 0
    [ -r "$root/var/lib/dpkg/status" ] || return 1
    # one paragraph per package: Package: NAME ... Status: install ok installed
    awk -v RS= '/(^|\n)Package: (proxmox-ve|pve-manager)\n/ && /\nStatus: install ok installed(\n|$)/ { found = 1 }
                END { exit !found }' "$root/var/lib/dpkg/status"
}

proxmox_refusal() {
    cat >&2 <<'TEXT'
bootstrap: error: this machine is a Proxmox VE node (/etc/pve, pveversion or the pve-manager
package): `make demo` and `make test` would install libvirt and Debian's QEMU beside
Proxmox's own, so they stop here.  vmbench drives the node through its API instead:
  - on a management box (or here): pipx install vmbench   (docs/install.md)
  - a scenario for the node: scenarios/proxmox.yaml, then vmbench images push and vmbench run
    (docs/proxmox.md: the API token, TLS, the template, the storage)
TEXT
}
