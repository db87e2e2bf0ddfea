# vmbench: `make demo` runs the quick scenario, `make test` the whole test suite.
# Both bootstrap the machine first (Debian 12, as root): see scripts/bootstrap.
# `make test-fast` runs only the unit tests and the type check (no guests; about a minute).

VENV := .venv

.PHONY: bootstrap demo test test-fast screenshot clean

bootstrap:
	scripts/bootstrap

# The demo bootstraps only what it needs (no test-only packages or extras); each step of the
# bootstrap and of the image build prints how long it took, the run prints its own clock.
demo:
	scripts/bootstrap --demo
	$(VENV)/bin/vmbench run scenarios/quick.yaml
	$(VENV)/bin/vmbench report latest

# Two pytest-xdist workers (a TCG guest keeps about one core busy), a test module stays on one
# worker with its module fixtures (the ZFS storage guest, the shared run); the tests marked
# serial (one restarts libvirtd, others check that nothing at all was created) run alone after,
# collected from tests/integration only (no unit test is serial; collecting tests/ too took 5 to 12 s).
test: bootstrap
	$(VENV)/bin/pytest -v -n 2 --dist loadfile -m "not serial" --durations=40 tests
	$(VENV)/bin/pytest -v -m serial tests/integration

test-fast:
	scripts/bootstrap --venv-only
	$(VENV)/bin/pytest -q tests/unit

# docs/html-report.png from the latest run's page (make demo first), in headless Chromium at 1400 px
screenshot:
	scripts/screenshot

clean:
	rm -rf $(VENV) .bootstrap
