# Two entry points: `make demo` (main job, embedded synthetic default) and `make test` (whole suite).
# Each creates its own virtual environment and installs bcjax into it; only Python >= 3.11 and make are needed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.bcjax-installed
OUT ?= runs/demo-$(shell date +%Y%m%d-%H%M%S)

.PHONY: demo test install clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[experiments,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m experiments.bc_aligner --preset quick --out $(OUT)

test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadscope --no-loadscope-reorder -q

clean:
	rm -rf $(VENV) runs
