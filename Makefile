# vmbench: `make demo` runs the quick scenario, `make test` the whole test suite.
# Both bootstrap the machine first (Debian 12, as root): see scripts/bootstrap.

VENV := .venv

.PHONY: bootstrap demo test clean

bootstrap:
	scripts/bootstrap

demo: bootstrap
	$(VENV)/bin/vmbench run scenarios/quick.yaml
	$(VENV)/bin/vmbench report latest

test: bootstrap
	$(VENV)/bin/pytest -v tests

clean:
	rm -rf $(VENV) .bootstrap
