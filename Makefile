# mel_opt: `make run` installs mel_opt with the train and plot extras (what the README's tour
# needs) and solves the shipped instances, `make test` runs the linters and the suite,
# `make dist` builds the wheel and the sdist into dist/.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip -q --disable-pip-version-check
MELOPT := $(VENV)/bin/melopt

.PHONY: run test install install-test lint docs bench dist clean

$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install -e '.[train,plot]'
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PIP) install -e '.[test,check,plot,ray,dev,train,docs,flower]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

run: $(VENV)/.installed
	$(MELOPT) solve instances

# two workers (pytest-xdist), a file's tests on one (its module fixtures made once); tests that
# start a federation or Ray take tests/live/conftest.py's lock, one at a time on the machine
test: lint docs
	$(PY) -m pytest -p no:cacheprovider --timeout=900 -n 2 --dist loadfile -rs --durations=20

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check mel_opt tests benchmarks
	$(VENV)/bin/mypy mel_opt

# The documentation site in site/ (open site/index.html); warnings are errors.
docs: $(VENV)/.installed-test
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d site

bench: $(VENV)/.installed-test
	for f in benchmarks/bench_*.py; do $(PY) $$f || exit 1; done

dist: $(VENV)/.installed-test
	$(PY) -m build --outdir dist .

clean:
	rm -rf $(VENV) results build dist site *.egg-info
