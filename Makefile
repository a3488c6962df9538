# make book | make test | make lab   (each creates .venv and installs requirements.txt if needed)
SHELL   := /bin/bash
PYTHON  ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-stamp
LAB_ARGS ?=
export PYTHONHASHSEED := 0

.PHONY: book test lint unit site launch lab venv clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python tools/vendor_assets.py
	touch $@

venv: $(STAMP)

## book: execute every chapter (two at a time) and build the HTML book into _build/html
book: $(STAMP)
	$(BIN)/python tools/build_book.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -n 2 --ignore=tests/site --ignore=tests/launch

## site: the built site in a real browser (headless Chromium, network cut) and as HTML, after `make book`;
## and every chapter's live explorer in a real JupyterLab, in the same browser, network cut
site: $(STAMP)
	bash tools/ensure_chromium.sh
	ICLR_LAB_SITE_REQUIRED=1 $(BIN)/python -m pytest tests/site -q

## launch: the chapters as readers launch them: a Binder-like and a Colab-like fresh environment
launch: $(STAMP)
	$(BIN)/python -m pytest tests/launch -q

## test: everything CI checks: ruff and mypy, the unit tests, the executed book build with -W, the
## built site in a browser, and the chapters launched in fresh Binder- and Colab-like environments
test: $(STAMP)
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory lint && \
	$(MAKE) --no-print-directory unit && \
	$(MAKE) --no-print-directory book && \
	$(MAKE) --no-print-directory site && \
	$(MAKE) --no-print-directory launch && \
	echo "make test: all checks passed in $$(( $$(date +%s) - start )) s"

## lab: JupyterLab with the chapters opening as notebooks (jupytext)
lab: $(STAMP)
	$(BIN)/python tools/jupytext_default_viewer.py
	$(BIN)/jupyter lab $(LAB_ARGS) $(if $(filter 0,$(shell id -u)),--allow-root) book/

clean:
	rm -rf _build _assets .pytest_cache iclr_lab_scoreboard
