"""``vmbench doctor`` asks the driver for its own checks (no branch on the driver's name):
the host's lines, the driver's, leftovers once the hypervisor answered, the crypto API."""

from __future__ import annotations

from tests.fakes import FakeDriver
from vmbench.cli import doctor
from vmbench.drivers.base import HypervisorDriver
from vmbench.errors import PreflightError


def checks(monkeypatch, tmp_path, driver: HypervisorDriver) -> list[doctor.Check]:
    monkeypatch.setenv("VMBENCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(doctor, "make_driver", lambda hv, storage, state: driver)
    return doctor.run_checks()


def test_the_drivers_own_checks_between_the_hosts_and_the_leftovers(monkeypatch, tmp_path):
    driver = FakeDriver()
    got = checks(monkeypatch, tmp_path, driver)
    assert [c.name for c in got] == ["root", "fio (host)", "fake", "accelerator", "leftovers", "host crypto API"]
    assert [c.status for c in got][1:5] == ["ok", "ok", "warn", "ok"]  # the fake runs guests under TCG
    assert driver.closed == 1


def test_no_leftovers_listed_when_the_hypervisor_does_not_answer(monkeypatch, tmp_path):
    driver = FakeDriver(fail_at="prepare", fail_with=PreflightError)
    got = checks(monkeypatch, tmp_path, driver)
    assert [(c.name, c.status) for c in got][2:] == [("fake", "FAIL"), ("host crypto API", "ok")]
    assert "injected failure" in got[2].detail and driver.closed == 1
