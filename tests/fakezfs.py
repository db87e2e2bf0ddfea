"""An in-memory OpenZFS on a FakeHost: enough ``zfs``/``zpool`` for the ZFS storage and a
host-only run, with every argv recorded (exact-argv tests) and a switch that makes one
property not take (read back as ZFS's default), to test the read-back."""

from __future__ import annotations

from tests.fakes import FakeHost

DEFAULTS = {"volume": {"volblocksize": "16384", "compression": "on", "sync": "standard"},
            "filesystem": {"recordsize": "131072", "compression": "on", "sync": "standard", "atime": "on"}}


class FakeZfsHost(FakeHost):
    def __init__(self, pool: str = "tank", **kw) -> None:
        super().__init__(**kw)
        self.pool = pool
        self.datasets: dict[str, dict] = {pool: {"type": "filesystem", "props": {}}}
        self.ignore: set[str] = set()  # properties that do not take on create
        self.scan = "none requested"
        self.files["/proc/spl/kstat/zfs/arcstats"] = b"13 1 0x01\nname type data\nhits 4 10\nmisses 4 2\nsize 4 1048576\nc 4 2\nc_min 4 1\nc_max 4 4294967296\n"
        self.files["/sys/module/zfs/parameters/zfs_txg_timeout"] = b"5\n"

    def add(self, name: str, kind: str = "filesystem", **props: str) -> None:
        self.datasets[name] = {"type": kind, "props": dict(props)}
        if kind == "filesystem":
            self.dirs.add("/" + name)
        else:
            self.files[f"/dev/zvol/{name}"] = b""

    def _value(self, name: str, prop: str) -> str:
        d = self.datasets[name]
        if prop in d["props"]:
            return d["props"][prop]
        if prop == "mountpoint":
            return "/" + name if d["type"] == "filesystem" else "-"
        if prop == "available":
            return str(self.free)
        if prop == "mounted":
            return "yes" if d["type"] == "filesystem" else "-"
        if prop == "type":
            return d["type"]
        if prop == "name":
            return name
        return DEFAULTS.get(d["type"], {}).get(prop, "-")

    def _cmd_zfs(self, argv, stdin):
        sub = argv[1]
        if sub == "version":
            return "zfs-2.1.11-1\nzfs-kmod-2.1.11-1\n"
        if sub == "list":
            cols = argv[argv.index("-o") + 1].split(",")
            names = [a for a in argv[2:] if not a.startswith("-") and a not in (argv[argv.index("-o") + 1],)
                     and a != "filesystem,volume"]
            if names:
                if names[0] not in self.datasets:
                    return 1, "", f"cannot open '{names[0]}': dataset does not exist"
                chosen = names
            else:
                chosen = sorted(self.datasets)
            return "".join("\t".join(self._value(n, c) for c in cols) + "\n" for n in chosen)
        if sub == "get":
            name = argv[-1]
            if name not in self.datasets:
                return 1, "", f"cannot open '{name}': dataset does not exist"
            cols = argv[argv.index("-o") + 1].split(",")
            props = argv[-2].split(",")
            rows = []
            for p in props:
                v = self._value(name, p)
                row = {"property": p, "value": v, "source": "local" if p in self.datasets[name]["props"] else "default"}
                rows.append("\t".join(row[c] for c in cols))
            return "\n".join(rows) + "\n"
        if sub == "create":
            name = argv[-1]
            parent = name.rsplit("/", 1)[0]
            if parent not in self.datasets:
                return 1, "", f"cannot create '{name}': parent does not exist"
            props = {}
            kind = "filesystem"
            i = 2
            while i < len(argv) - 1:
                if argv[i] == "-o":
                    k, v = argv[i + 1].split("=", 1)
                    if k not in self.ignore:
                        props[k] = v
                    i += 2
                elif argv[i] == "-V":
                    kind = "volume"
                    i += 2
                else:
                    i += 1
            self.add(name, kind, **props)
            return ""
        if sub == "destroy":
            name = argv[-1]
            if name not in self.datasets:
                return 1, "", f"cannot open '{name}': dataset does not exist"
            if any(n.startswith(name + "/") for n in self.datasets):
                return 1, "", f"cannot destroy '{name}': filesystem has children"
            del self.datasets[name]
            self.files.pop(f"/dev/zvol/{name}", None)
            self.dirs.discard("/" + name)
            self.files = {f: v for f, v in self.files.items() if not f.startswith("/" + name + "/")}
            return ""
        return 2, "", f"zfs {sub}: not known to this fake"

    def _cmd_zpool(self, argv, stdin):
        if argv[1] == "status":
            return f"  pool: {self.pool}\n state: ONLINE\n  scan: {self.scan}\nconfig:\n\n\tNAME STATE\n\t{self.pool} ONLINE\n\t  /dev/vdb1 ONLINE\n"
        if argv[1] == "list":
            return f"{self.pool}\t6442450944\t1048576\t6441402368\t-\t-\t0\t0\t1.00\tONLINE\t-\n"
        if argv[1] == "get":
            return "12\n"
        return 2, "", "zpool: not known to this fake"

    def _cmd_zdb(self, argv, stdin):
        return f"{self.pool}:\n    vdev_tree:\n        children[0]:\n            ashift: 12\n"

    def _cmd_udevadm(self, argv, stdin):
        return ""

    def _cmd_truncate(self, argv, stdin):
        self.files[argv[-1]] = b""
        return ""

    def _cmd_hostname(self, argv, stdin):
        return "zfshost\n"

    def _cmd_test(self, argv, stdin):
        if argv[1] == "-b":
            return (0 if argv[2].startswith("/dev/zvol/") and argv[2] in self.files else 1), "", ""
        return super()._cmd_test(argv, stdin)

    def _fio_target_ok(self, target: str) -> bool:
        return self._exists(target)
