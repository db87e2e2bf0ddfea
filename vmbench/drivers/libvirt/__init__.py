"""The libvirt driver: local or over SSH (needs the ``libvirt`` extra, libvirt-python)."""
