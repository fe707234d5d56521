# kns-platform: set-up, tests and the main job. Versions live in versions.env and
# requirements.txt (kept equal by tests/test_versions.py).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: venv system-deps test up outputs preview recover bench clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

venv: $(VENV)/.installed

system-deps:
	bash scripts/system-deps.sh

## make test: the whole test suite (creates the virtualenv first).
test: venv system-deps
	$(PY) -m pytest -q -n 3 --dist loadscope

## make up: the main job, the dev stack rendered to build/manifests/dev. ENTRIES="a b": apply
## those entries only (./kns up, docs/cli.md); refused when anything shared changed.
up: venv
	$(if $(ENTRIES),./kns up --stack $(or $(KNS_STACK),dev) $(ENTRIES),bash scripts/up.sh up)

## make outputs: the stack outputs of the last `make up` (its backend and passphrase), saying which stack.
## Every target runs the dev stack unless KNS_STACK names another, which needs PULUMI_CONFIG_PASSPHRASE or
## PULUMI_CONFIG_PASSPHRASE_FILE (README, "Passphrases"; checked before anything runs).
outputs: venv
	@bash scripts/up.sh outputs

## make preview: what `make up` would change, as a diff. ENTRIES="a b": a preview of those
## entries only, summarised per entry (./kns preview, docs/cli.md).
preview: venv
	$(if $(ENTRIES),./kns preview --stack $(or $(KNS_STACK),dev) $(ENTRIES),bash scripts/up.sh preview)

## make recover: after an interrupted `make up` (Ctrl-C, a killed CI job, an API server restart):
## state, cluster and config made to agree again (./kns recover, docs/operations.md). FORCE=1
## also releases a lock taken on another host.
recover: venv
	./kns recover --stack $(or $(KNS_STACK),dev) $(if $(FORCE),--force)

## make schema: the JSON Schemas of docs/schema, generated from config/models.py by tools/schema.py.
.PHONY: schema docs
schema: venv
	$(PY) -m tools.schema docs/schema

## make docs: rewrite the documented `./kns` sessions from real runs (tests/test_doc_commands.py checks them).
docs: venv
	$(PY) -m tests.test_doc_commands

## make bench: the benchmarks of bench/ (tables on stdout, JSON in build/bench/).
bench: venv system-deps
	cd bench && ../$(PY) program_scaling.py
	cd bench && ../$(PY) engine_preview.py
	cd bench && ../$(PY) program_end.py
	cd bench && ../$(PY) prescale_accuracy.py
	cd bench && ../$(PY) binpacking.py
	cd bench && ../$(PY) autoscale_warmup.py
	cd bench && ../$(PY) kueue_admission.py
	cd bench && ../$(PY) queue_fit.py
	cd bench && ../$(PY) priority_start.py
	cd bench && ../$(PY) primer_proof.py
	cd bench && ../$(PY) targeted_preview.py
	cd bench && ../$(PY) targeted_up.py
	cd bench && ../$(PY) apply_vs_kubectl.py 100 300 --levers 100

clean:
	rm -rf build .pytest_cache

## make cluster-up / cluster-down: a local control plane (etcd, kube-apiserver,
## kube-controller-manager, kube-scheduler, kwok) built from Go modules; state, logs and
## the admin kubeconfig in $(CLUSTER_STATE). CLUSTER_NODES=<nodes.yaml> registers fake nodes.
CLUSTER_STATE ?= build/cluster
CLUSTER_NODES ?=
.PHONY: cluster-up cluster-down
cluster-up:
	bash scripts/cluster-up.sh $(CLUSTER_STATE) $(if $(CLUSTER_NODES),--nodes $(CLUSTER_NODES))

cluster-down:
	bash scripts/cluster-down.sh $(CLUSTER_STATE)
