# kns-platform: set-up, tests and the main job. Versions live in versions.env and
# requirements.txt (kept equal by tests/test_versions.py).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: venv system-deps test up preview clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

venv: $(VENV)/.installed

system-deps:
	bash scripts/system-deps.sh

## make test: the whole test suite (creates the virtualenv first).
test: venv system-deps
	$(PY) -m pytest -q

## make up: the main job, the dev stack rendered to build/manifests/dev.
up: venv
	bash scripts/up.sh up

## make preview: what `make up` would change, as a diff.
preview: venv
	bash scripts/up.sh preview

clean:
	rm -rf build .pytest_cache
