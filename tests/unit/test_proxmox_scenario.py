"""The ``hypervisor:`` section with ``driver: proxmox``: keys, defaults, and every mistake
named with file, line and key (and never a secret repeated back)."""

import textwrap

import pytest

from vmbench.drivers import DRIVERS, make_host
from vmbench.errors import ScenarioError
from vmbench.scenario import parse_scenario
from vmbench.settings import Accel, DriverName

JOBS = """
jobs:
  - {name: j1, rw: randwrite, bs: 4k}
"""
FP = ":".join(["AB"] * 32)


def scenario(hv: str, extra: str = "") -> str:
    return "name: t\nhypervisor:\n" + textwrap.indent(textwrap.dedent(hv).strip() + "\n", "  ") + extra + JOBS


BASE = """
driver: proxmox
host: pve1.example.org
node: pve1
template: 9000
storage: local-zfs
token: {id: "vmbench@pve!bench", secret_file: ~/.config/vmbench/pve1.token}
"""


def parse(hv: str, extra: str = "", filename: str = "/scen/t.yaml"):
    return parse_scenario(scenario(hv, extra), filename)


def error(hv: str, extra: str = "") -> str:
    with pytest.raises(ScenarioError) as exc:
        parse(hv, extra)
    e = exc.value
    return e.message + (f" | hint: {e.hint}" if e.hint else "")


def test_full_example_parses_into_the_model():
    s = parse(BASE + """
port: 8007
tls: {ca_file: pve-root-ca.pem}
ssh: {user: admin, port: 2222, key_file: /keys/id, known_hosts: /keys/kh}
timeout: 60s
accel: tcg
boot_timeout: 5m
clone: full
state_dir: /var/lib/vmbench
""")
    hv = s.hypervisor
    pve = hv.proxmox
    assert hv.driver is DriverName.PROXMOX and hv.accel is Accel.TCG and hv.boot_timeout == 300
    assert (pve.host, pve.port, pve.node, pve.template, pve.storage) == ("pve1.example.org", 8007, "pve1", 9000, "local-zfs")
    assert (pve.user, pve.token_name) == ("vmbench@pve", "bench")
    assert pve.secret_file.endswith("/.config/vmbench/pve1.token") and not pve.secret_file.startswith("~")
    assert pve.tls_ca_file == "/scen/pve-root-ca.pem"  # relative to the scenario file
    assert pve.timeout == 60 and pve.clone == "full"
    assert hv.uri == "https://pve1.example.org:8007/api2/json/nodes/pve1"
    # the SSH transport goes to the API host unless ssh.host says otherwise
    assert (hv.ssh.host, hv.ssh.user, hv.ssh.port, hv.ssh.key_file) == ("pve1.example.org", "admin", 2222, "/keys/id")
    assert hv.state_dir == "/var/lib/vmbench"
    assert make_host(hv).__class__.__name__ == "SshTransport"
    assert DRIVERS[DriverName.PROXMOX] == "vmbench.drivers.proxmox.driver:ProxmoxDriver"


def test_defaults():
    hv = parse(BASE).hypervisor
    pve = hv.proxmox
    assert (pve.port, pve.timeout, pve.clone, pve.tls_verify, pve.tls_ca_file, pve.tls_fingerprint) == (8006, 30.0, "linked", True, None, None)
    assert pve.tls_mode == "verified against the system CA store"
    assert hv.ssh.host == "pve1.example.org" and hv.ssh.user == "root" and hv.ssh.port == 22
    assert hv.accel is Accel.AUTO


def test_template_by_name_and_secret_from_the_environment():
    pve = parse(BASE.replace("template: 9000", "template: debian12-tmpl").replace(
        "secret_file: ~/.config/vmbench/pve1.token", "secret_env: VMBENCH_PVE_TOKEN")).hypervisor.proxmox
    assert pve.template == "debian12-tmpl" and pve.secret_env == "VMBENCH_PVE_TOKEN" and pve.secret_file is None
    assert "environment variable VMBENCH_PVE_TOKEN" in pve.secret_source
    assert parse(BASE.replace("template: 9000", 'template: "9001"')).hypervisor.proxmox.template == 9001


def test_tls_fingerprint_is_normalised_and_verify_false_is_explicit():
    pve = parse(BASE + f"tls: {{fingerprint: \"{FP.lower().replace(':', '')}\"}}\n").hypervisor.proxmox
    assert pve.tls_fingerprint == FP and pve.tls_mode == f"pinned certificate SHA-256 {FP}"
    off = parse(BASE + "tls: {verify: false}\n").hypervisor.proxmox
    assert off.tls_verify is False and "OFF" in off.tls_mode


def test_missing_required_keys_are_named():
    for key in ("host", "node", "template", "storage", "token"):
        text = "\n".join(l for l in BASE.splitlines() if not l.startswith(key + ":"))
        msg = error(text)
        assert f"hypervisor.{key}: is required for driver proxmox" in msg, msg


def test_secret_in_the_scenario_is_refused_without_repeating_it():
    secret = "0a1b2c3d-4e5f-6789-abcd-ef0123456789"
    msg = error(BASE.replace("secret_file: ~/.config/vmbench/pve1.token", f"secret: {secret}"))
    assert "t.yaml:8: hypervisor.token.secret: the token secret never goes in the scenario" in msg
    assert "secret_file" in msg and "secret_env" in msg and secret not in msg
    msg = error(BASE.replace('id: "vmbench@pve!bench"', f'id: "vmbench@pve!bench={secret}"'))
    assert "hypervisor.token.id: is not a token id" in msg and "must not contain the secret" in msg and secret not in msg
    msg = error(BASE.replace('token: {id: "vmbench@pve!bench", secret_file: ~/.config/vmbench/pve1.token}',
                             f'token: "vmbench@pve!bench={secret}"'))
    assert "hypervisor.token: is a mapping" in msg and secret not in msg
    assert "secrets never go in the scenario" in error(BASE + "password: hunter2\n")


def test_token_needs_exactly_one_secret_source():
    assert "needs secret_file or secret_env" in error(BASE.replace(", secret_file: ~/.config/vmbench/pve1.token", ""))
    assert "exactly one of secret_file and secret_env" in error(
        BASE.replace("secret_file: ~/.config/vmbench/pve1.token", "secret_file: /x, secret_env: Y"))
    assert "unknown key" in error(BASE.replace("secret_file:", "secretfile:"))
    assert "is not an environment variable name" in error(BASE.replace("secret_file: ~/.config/vmbench/pve1.token", "secret_env: 1X"))


def test_libvirt_only_keys_are_refused_for_proxmox():
    msg = error(BASE + "uri: qemu:///system\n")
    assert "hypervisor.uri: applies to driver libvirt, not proxmox" in msg
    assert "hypervisor.machine: applies to driver libvirt" in error(BASE + "machine: q35\n")
    msg = error(BASE + "pool: x\n")
    assert "hypervisor.pool: unknown key" in msg


def test_proxmox_only_keys_are_refused_for_libvirt():
    msg = error("driver: libvirt\nnode: pve1\n")
    assert "hypervisor.node: applies to driver proxmox, not libvirt" in msg and "driver: proxmox" in msg
    msg = error("template: 9000\n")
    assert "hypervisor.template: applies to driver proxmox" in msg and "top-level template" in msg
    assert "hypervisor.token: applies to driver proxmox" in error("token: {id: a@b!c, secret_env: X}\n")


def test_bad_values_name_key_and_allowed_values():
    assert "hypervisor.template: 12 is not a VMID (100 to 999999999)" in error(BASE.replace("template: 9000", "template: 12"))
    assert "is not a VMID or a VM name" in error(BASE.replace("template: 9000", "template: bad_name!"))
    assert "is not a PVE storage ID" in error(BASE.replace("storage: local-zfs", "storage: Local ZFS"))
    assert "is not a PVE node name" in error(BASE.replace("node: pve1", "node: -pve1"))
    assert "hypervisor.tls.fingerprint" in error(BASE + "tls: {fingerprint: AB:CD}\n")
    assert "give ca_file or fingerprint, not both" in error(BASE + f"tls: {{ca_file: a.pem, fingerprint: \"{FP}\"}}\n")
    assert "does not combine with ca_file" in error(BASE + "tls: {ca_file: a.pem, verify: false}\n")
    assert "below the minimum 5s" in error(BASE + "timeout: 1s\n")
    assert "is not one of: linked, full" in error(BASE + "clone: thin\n")
    assert "never takes a password" in error(BASE + "ssh: {password: x}\n")
    assert "did you mean 'known_hosts'" in error(BASE + "ssh: {known_host: /x}\n")


def test_the_secret_file_contents_are_never_read_while_parsing(tmp_path):
    secret = tmp_path / "pve.token"
    secret.write_text("s3cr3t-value\n")
    s = parse_scenario(scenario(BASE.replace("~/.config/vmbench/pve1.token", "pve.token")), str(tmp_path / "t.yaml"))
    assert s.hypervisor.proxmox.secret_file == str(secret)
    assert "s3cr3t-value" not in repr(s.hypervisor)


def test_zfs_dataset_storage_is_named_as_not_supported_with_proxmox():
    with pytest.raises(ScenarioError) as exc:
        parse(BASE, "storage: {type: zfs-dataset, dataset: rpool/data}\n")
    assert "storage.type: zfs-dataset is not supported with driver proxmox" in exc.value.message
    assert parse(BASE, "storage: {type: zfs, dataset: rpool/data}\n").storage.dataset == "rpool/data"


def test_plan_names_the_template_vm_and_the_pve_storage(tmp_path, capsys):
    """`vmbench plan` of a Proxmox scenario (issue 39): the template VM and the PVE storage the run
    uses (its type where the storage: section says it), not the libvirt recipe and dir pool."""
    from vmbench.cli.main import main

    s = parse(BASE.replace("template: 9000", "template: vmbench-debian12").replace("local-zfs", "vmbdir"))
    assert (s.template_label(), s.storage_label()) == ("Proxmox VM vmbench-debian12", "PVE storage vmbdir, scratch 1g")
    zvols = parse(BASE, "storage: {type: zfs, dataset: rpool/data, volblocksize: 16k, scratch_size: 4G}\n")
    assert zvols.storage_label() == "PVE storage local-zfs (zfspool: zvols under rpool/data), scratch 4g"
    assert parse("driver: libvirt").template_label() == "debian12"
    path = tmp_path / "pve.yaml"
    path.write_text(scenario(BASE.replace("storage: local-zfs", "storage: vmbdir") + "accel: tcg\n"))
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "template: Proxmox VM 9000; PVE storage vmbdir, scratch 1g; plan: baseline" in out, out
    assert "debian12" not in out and "dir pool" not in out
