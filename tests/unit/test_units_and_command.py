import pytest

from vmbench.command import run
from vmbench.errors import CommandError, CommandTimeout
from vmbench.settings import Bus, Cache
from vmbench.units import format_duration, format_size, parse_duration, parse_size


@pytest.mark.parametrize("text, n", [("4k", 4096), ("64K", 65536), ("1M", 1 << 20), ("1GiB", 1 << 30), (512, 512), ("1.5k", 1536)])
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("bad", ["four", "-1", "1x", True, None, 0.5])
def test_parse_size_refuses(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_durations_and_formats():
    assert parse_duration("10s") == 10 and parse_duration("2m") == 120 and parse_duration("500ms") == 0.5 and parse_duration(3) == 3
    assert format_size(4096) == "4k" and format_size(1 << 30) == "1g" and format_size(1000) == "1000"
    assert format_duration(12) == "12s" and format_duration(125) == "2m05s" and format_duration(7300) == "2h01m"


def test_enum_parse_errors_list_allowed_values():
    assert Bus.parse("virtio-scsi") is Bus.VIRTIO_SCSI
    with pytest.raises(ValueError, match="is not one of: virtio-blk, virtio-scsi, virtio-scsi-shared, sata"):
        Bus.parse("ide")
    assert Cache.NONE.direct and not Cache.WRITEBACK.direct and Cache.UNSAFE.writeback


def test_run_argv_stdin_and_failures():
    assert run(["cat"], input=b"secret").stdout == "secret"
    with pytest.raises(CommandError) as exc:
        run(["sh", "-c", "echo boom >&2; exit 3"])
    assert exc.value.returncode == 3 and "boom" in exc.value.stderr and exc.value.argv == ["sh", "-c", "echo boom >&2; exit 3"]
    assert run(["false"], check=False).returncode == 1
    with pytest.raises(CommandTimeout):
        run(["sleep", "5"], timeout=0.3)
    with pytest.raises(CommandError, match="command not found"):
        run(["/nonexistent/tool"])


def test_run_reports_progress_while_waiting():
    seen = []
    run(["sleep", "1.3"], on_wait=seen.append)
    assert seen and seen[0] >= 0.9


def test_timeout_kills_the_whole_process_group():
    import time

    started = time.monotonic()
    with pytest.raises(CommandTimeout):
        run(["sh", "-c", "sleep 30 & sleep 30"], timeout=0.5)
    assert time.monotonic() - started < 5
