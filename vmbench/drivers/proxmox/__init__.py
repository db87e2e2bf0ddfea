"""The Proxmox VE driver: ``driver.ProxmoxDriver`` (lifecycle), ``api.PveApi`` (the one seam
to the PVE API), ``config`` (VM settings as PVE options, pure), ``evidence`` (config and QEMU
command line read back, pure), ``storage`` (the PVE storage, temporary zfspool entries).
Guests are reached through :class:`vmbench.drivers.proxmox.agent.PveAgentTransport`."""
