# Tessera developer entry points. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: help dev test verify unit fuzz integration crds deploy demo demo-down bench controlplane clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# Quiet: one line, then pip's errors or warnings only. setuptools says "Editable installation"
# (a UserWarning, information only) for every editable install whose package folders are
# mapped (the package roots are operator/ and api/, see setup.py); pip shows a build's
# warnings, so that one is filtered by its text, in the build's subprocess too, and every
# other warning still shows.
$(STAMP): pyproject.toml setup.py devcluster/pyproject.toml
	@echo "==> creating $(VENV): tessera with the dev extras, and the dev cluster (under a minute)"
	@$(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --upgrade pip
	@PYTHONWARNINGS="ignore:Editable installation:UserWarning" \
		$(PY) -m pip install --quiet -e '.[dev]' -e ./devcluster
	@touch $(STAMP)

dev: $(STAMP) ## create .venv: tessera with the dev extras, and the dev cluster (devcluster/, `tessera dev`)

controlplane: ## build (or reuse) etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, KWOK, Kueue
	@hack/controlplane/build.sh >/dev/null
	@hack/build-tool.sh kwok >/dev/null
	@hack/build-tool.sh kueue >/dev/null

verify: $(STAMP) ## ruff, mypy --strict, import-linter, generated files are fresh
	$(VENV)/bin/ruff check operator api devcluster tests hack bench
	$(VENV)/bin/ruff format --check operator api devcluster tests hack bench
	$(VENV)/bin/mypy -p tessera -p devcluster
	$(VENV)/bin/mypy hack/gen_crds.py hack/render_deploy.py hack/gen_docs.py
	PYTHONPATH=operator:api $(VENV)/bin/lint-imports  # grimp reads the roots, not the editable hook
	$(PY) hack/gen_crds.py --check
	$(PY) hack/gen_docs.py --check
	TESSERA_CONTROLPLANE_BIN="$$(hack/controlplane/build.sh)" $(PY) hack/render_deploy.py --check

unit: $(STAMP) ## unit tests (pure domain, milliseconds each)
	$(PY) -m pytest tests/unit -q

fuzz: $(STAMP) ## property tests with fresh random seeds, ten rounds (make test runs them derandomized)
	for round in 1 2 3 4 5 6 7 8 9 10; do \
		TESSERA_HYPOTHESIS=explore $(PY) -m pytest tests/unit -q -p no:cacheprovider || exit 1; \
	done

# Two workers, each with its own control plane and operator (pytest-xdist); a module's tests
# stay together on one worker (--dist loadfile), in their order, as they run alone.
INTEGRATION_WORKERS ?= 2

integration: $(STAMP) controlplane ## integration tests against a real local control plane
	TESSERA_CONTROLPLANE_BIN="$$(hack/controlplane/build.sh)" $(PY) -m pytest tests/integration -q \
		-n $(INTEGRATION_WORKERS) --dist loadfile

test: verify unit integration ## everything CI runs: verify + unit + integration

.PHONY: docs
docs: $(STAMP) ## regenerate what docs/ draws from the code (the rollout state diagram)
	$(PY) hack/gen_docs.py

crds: $(STAMP) ## regenerate crds/ from the pydantic models in api/
	$(PY) hack/gen_crds.py

deploy: $(STAMP) ## re-render deploy/ (install manifest, chart CRDs, Argo CD health) from config/
	TESSERA_CONTROLPLANE_BIN="$$(hack/controlplane/build.sh)" $(PY) hack/render_deploy.py

demo: $(STAMP) controlplane ## local control plane + simulated GPU/NPU nodes + operator + samples
	@TESSERA_CONTROLPLANE_BIN="$$(hack/controlplane/build.sh)" $(VENV)/bin/tessera dev demo --state-dir .demo

demo-down: $(STAMP) ## stop everything `make demo` started
	@$(VENV)/bin/tessera dev down --state-dir .demo

bench: $(STAMP) ## benchmarks: ratios measured side by side, printed as tables
	$(PY) -m bench

clean: ## remove the venv and caches (not the control-plane binaries)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
