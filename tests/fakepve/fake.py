"""The FakePve context manager: schema, state, backend and HTTPS server together."""

from __future__ import annotations

import secrets
import shutil
import uuid
from pathlib import Path
from typing import Any

from .backends import NullBackend
from .formats import named_formats
from .model import State, Storage, Vm
from .perms import Access
from .schema import Api
from .server import Dispatcher, make_tls, private_root, serve
from .validate import Checker, format_size


class FakePve:
    """A fake Proxmox VE node over HTTPS on 127.0.0.1 (see the package docstring); with
    ``nodes`` a cluster of those nodes behind one API (``node`` is then the first): its own
    /cluster/status, storages per node (``add_storage(..., nodes="pve1,pve2", shared=1)``),
    VMs on their node, nodes taken offline and back (:meth:`set_online`)."""

    def __init__(self, version: str = "9.1", backend: Any = None, node: str = "pve1", nodes: tuple[str, ...] = (),
                 token: tuple[str, str] | None = ("vmbench@pve!bench", "SECRET"), missing_privileges: Any = (),
                 task_polls: int = 2, agent_pings: int = 2, task_outcomes: dict | None = None,
                 root_dir: str | None = None, local_path: str | None = None, strict: bool = True,
                 local_content: str = "images,rootdir,vztmpl,iso,backup,snippets") -> None:
        self.version = version
        self.backend = backend if backend is not None else NullBackend()
        self.nodes = tuple(nodes) or (node,)
        self.node = self.nodes[0]
        self.token = token
        self._missing = tuple(missing_privileges)
        #: root@pam's own token (not privilege-separated: every privilege), for setting the node up
        self.root_token = ("root@pam!fakepve", secrets.token_hex(16))
        self.strict = strict
        self.api = Api(version)
        formats, validators = named_formats(version)
        self.checker = Checker(formats, validators)
        self._opts = dict(task_polls=task_polls, agent_pings=agent_pings, task_outcomes=task_outcomes)
        self._root_dir = root_dir
        self._local_path = local_path
        self._local_content = local_content
        self.root: Path | None = None
        self.state: State | None = None
        self.dispatcher: Dispatcher | None = None
        self._server = None
        self._thread = None
        self.port = 0
        self.ca_file = ""
        self.cert_fingerprint = ""

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> "FakePve":
        self.root = private_root(self._root_dir)
        try:
            tls = self.root / "tls"
            tls.mkdir(mode=0o700)
            ca, cert, key, fp = make_tls(tls)
            self.ca_file, self.cert_fingerprint = str(ca), fp
            self.backend.setup(self.root)
            self.state = State(version=self.version, node=self.node, root=self.root, backend=self.backend,
                               checker=self.checker, api=self.api, user=(self.token or self.root_token)[0],
                               nodes=self.nodes, **self._opts)
            self.state.fingerprint = fp
            self._setup_access()
            self.add_storage("local", "dir", path=self._local_path or str(self.root / "local"),
                             content=self._local_content)
            self.dispatcher = Dispatcher(version=self.version, state=self.state, api=self.api, checker=self.checker)
            self._tls_files = (cert, key)
            self._server, self._thread = serve(self.dispatcher, cert, key)
            self.port = self._server.server_address[1]
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop the server, the VMs (backend domains) and remove every volume and file."""
        errors = []
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self.state is not None:
            try:
                self.state.cleanup()
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)
        try:
            self.backend.close()
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        if self.root is not None and self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
        if errors:
            raise errors[0]

    def __enter__(self) -> "FakePve":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.close()
        finally:
            if exc_type is None and self.strict:
                self.assert_clean()

    # ---- users, tokens, ACLs (:mod:`.perms`) -------------------------------------------------

    def _setup_access(self) -> None:
        """root@pam's token; the token of ``token`` with every privilege (Administrator on /,
        for it and its user), less ``missing_privileges`` (:meth:`revoke` each)."""
        access = self.access
        access.add_token(self.root_token[0], privsep=False, secret=self.root_token[1])
        if self.token is None:
            return
        access.add_token(self.token[0], secret=self.token[1])
        self.grant("/", "Administrator")
        for item in self._missing:
            path, priv = item if isinstance(item, tuple) else ("/", item)
            self.revoke(priv, path)

    @property
    def access(self) -> Access:
        return self.state.access

    def grant(self, path: str, *roles: str, propagate: bool = True, tokens: Any = None, users: Any = None) -> None:
        """An ACL as ``pveum acl modify PATH --roles ... --users USER --tokens TOKEN`` sets it
        (default: the fake's token and its user)."""
        tokens = [self.token[0]] if tokens is None and self.token else list(tokens or ())
        users = [t.partition("!")[0] for t in tokens] if users is None else list(users)
        self.access.set_acl(path, roles, users=users, tokens=tokens, propagate=propagate)

    def revoke(self, privilege: str, path: str = "/") -> None:
        """The token loses ``privilege`` on ``path`` (and below), through ACLs as an admin would:
        its own ACL on ``path`` now gives a role with what it had there but that privilege
        (that ACL replaces what the token inherited for ``path`` and below)."""
        assert self.token is not None
        tokenid = self.token[0]
        have = self.access.permissions(tokenid, path)
        role = f"fakepve-{len(self.access.roles)}"
        self.access.add_role(role, sorted(set(have) - {privilege}))
        node = self.access.acl.setdefault(path, {})
        node[("tokens", tokenid)] = {role: 1}

    # ---- what tests look at --------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api2/json"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def auth_header(self) -> dict[str, str]:
        return self.auth_of(self.token or self.root_token)

    @staticmethod
    def auth_of(token: tuple[str, str]) -> dict[str, str]:
        """The header of a token (id, secret): ``fake.auth_of(fake.root_token)``."""
        return {"Authorization": f"PVEAPIToken={token[0]}={token[1]}"}

    @property
    def requests(self) -> list:
        return self.dispatcher.requests if self.dispatcher else []

    @property
    def problems(self) -> list[str]:
        return self.dispatcher.problems if self.dispatcher else []

    @property
    def vms(self) -> dict[int, Vm]:
        return self.state.vms

    @property
    def storages(self) -> dict[str, Storage]:
        return self.state.storages

    @property
    def tasks(self) -> dict:
        return self.state.tasks

    def calls(self) -> list[tuple[str, str]]:
        """(METHOD, path template) of every routed request, in order."""
        return [(r.method, r.template) for r in self.requests if r.template]

    def assert_clean(self) -> None:
        """Fail when the fake met something it cannot check (unknown format, unimplemented
        endpoint, a response not matching ``returns``, a fake bug)."""
        if self.problems:
            raise AssertionError("fake PVE problems:\n  " + "\n  ".join(self.problems))

    def volume_path(self, volid: str) -> str:
        with self.dispatcher.lock:
            st, vol = self.state.resolve(volid)
            return self.state.path_text(st, vol)

    def set_online(self, node: str, online: bool = True) -> None:
        """Take a node offline (its API paths answer 595, it leaves the quorum) or bring it back."""
        with self.dispatcher.lock:
            if node not in self.state.nodes:
                raise KeyError(node)
            self.state.nodes[node] = online

    def api_down(self, how: str = "pveproxy") -> None:
        """The API stops answering until :meth:`api_up`: ``pveproxy`` (its port refuses
        connections, open ones are cut; the VMs and tasks go on) or ``pvedaemon`` (pveproxy
        answers ``595 Connection refused`` for every protected call, the ones it proxies to
        pvedaemon, as a real node did with pvedaemon stopped)."""
        if how == "pvedaemon":
            self.dispatcher.daemon_down = True
        elif how == "pveproxy":
            if self._server is not None:
                self._server.cut()
                self._server = None
        else:
            raise ValueError(f"api_down: {how!r} is not pveproxy or pvedaemon")

    def lose_answer(self, method: str, template: str) -> None:
        """The next ``method template`` request (``POST /nodes/{node}/qemu/{vmid}/clone``) is
        served, then its connection drops before the answer (pveproxy restarted mid-request)."""
        with self.dispatcher.lock:
            self.dispatcher.lose_answers.append((method, template))

    def api_up(self) -> None:
        """The API answers again, on the same port."""
        self.dispatcher.daemon_down = False
        if self._server is None:
            self._server, self._thread = serve(self.dispatcher, *self._tls_files, port=self.port)

    def node_of(self, vmid: int) -> str:
        return self.state.node_of(self.state.vms[vmid])

    def finish_tasks(self) -> None:
        with self.dispatcher.lock:
            self.state.finish_all()

    # ---- state helpers -------------------------------------------------------------------

    def add_storage(self, storage: str, type: str = "dir", *, path: str | None = None, content: str = "images,rootdir",
                    images: Any = None, **options: Any) -> Storage:
        """A storage entry; ``dir`` volumes live under ``path`` (default: the fake's own
        directory), zfspool volumes under <root>/zvol/<pool>/ (files standing for zvols), rbd
        volumes are images in ``images`` (:mod:`tests.fakepve.rbd`)."""
        config: dict[str, Any] = {"content": content, **{k.replace("_", "-"): v for k, v in options.items()}}
        files = None
        if type == "dir":
            config["path"] = path or str(self.root / "storage" / storage)
            files = Path(config["path"])
        elif type == "zfspool":
            config.setdefault("pool", "rpool/data")
        elif type == "rbd":  # images: tests.fakepve.rbd's CephImages (a real pool) or MemoryImages (the default)
            config.setdefault("pool", "rbd")
            return self.state.add_storage(storage, type, config, images=images)
        return self.state.add_storage(storage, type, config, files)

    def add_template(self, vmid: int = 9000, name: str = "debian12-tmpl", agent: bool = True, template: bool = True,
                     storage: str = "local", tags: str = "debian12;template", disk: str = "virtio0",
                     cores: int = 2, memory: int = 1024, node: str | None = None, **config: Any) -> Vm:
        """A VM as PVE stores a cloud-image template: base disk ``base-<vmid>-disk-0``
        (``vm-<vmid>-disk-0`` when ``template=False``), agent, tags, ``template: 1``."""
        st = self.state.storage(storage)
        fmt = "qcow2" if st.path_based else "raw"
        vol = self.state.allocate(st, vmid, 0, fmt, base=template, image=True)
        conf: dict[str, Any] = {
            "name": name, "agent": "1" if agent else "0", "cores": cores, "sockets": 1, "memory": str(memory),
            "ostype": "l26", "scsihw": "virtio-scsi-single", "boot": f"order={disk}",
            disk: f"{self.state.volid(st, vol)},size={format_size(vol.size)}",
            "smbios1": f"uuid={uuid.uuid4()}", "vmgenid": str(uuid.uuid4()),
        }
        if tags:
            conf["tags"] = tags
        if template:
            conf["template"] = 1
        conf.update(config)
        vm = Vm(vmid, conf, node=node or self.node)
        self.state.vms[vmid] = vm
        return vm

    def add_user_vm(self, vmid: int = 101, name: str = "web1", storage: str = "local", disk: str = "scsi0",
                    disk_options: str = "", **config: Any) -> Vm:
        """A VM a user made (not vmbench, not a template): one disk ``disk`` on ``storage``
        with ``disk_options`` before its ``size=`` (as PVE stores them), no vmbench tags;
        ``config`` adds or overrides keys (``cpu``, ``scsihw``, ``boot``, ``ide2``, ``efidisk0``...)."""
        vm = self.add_template(vmid, name, template=False, storage=storage, tags="", disk=disk, agent=False, **config)
        if disk_options:
            volid, _, size = str(vm.config[disk]).partition(",")
            vm.config[disk] = f"{volid},{disk_options.strip(',')},{size}"
        return vm
