# The course's commands. `make help` lists them.
#
# The first command that needs Python builds .venv from requirements.txt and reuses it after.
# PYTHON=python3 skips that and uses the interpreter you name (GPU machines without network,
# containers that already hold the packages). WHEELS=dir installs from a folder of wheels only.

VENV ?= .venv
PYTHON ?= $(VENV)/bin/python
WHEELS ?=
TORCH_CPU ?= torch==2.13.0
TORCH_INDEX ?=

STEP ?= all
IMPL ?= steps
TRACK ?= auto
ARCH ?= auto
SHAPES ?=
TODO ?=
LEVEL ?= 1

PIP_SOURCE = $(if $(WHEELS),--no-index --find-links $(WHEELS))
ENV_READY = $(if $(filter $(VENV)/bin/python,$(PYTHON)),$(VENV)/.ready)
# Each value reaches the grader as one shell word, whatever it holds (TRACK='hopper --impl solutions'
# is one unknown track, not two options).
quote = '$(subst ','\'',$(1))'
GRADER_ARGS = --step $(call quote,$(STEP)) --impl $(call quote,$(IMPL)) --track $(call quote,$(TRACK)) \
	--arch $(call quote,$(ARCH)) $(foreach s,$(SHAPES),--shape $(call quote,$(s)))

.PHONY: help setup sandbox grade hint inspect debug timeline check sanitize bench calibrate autograder grade-class grade-class-status test notebooks wheelhouse clean

help:
	@echo "make grade STEP=5 [IMPL=steps|solutions] [TRACK=auto|blackwell|hopper] [ARCH=auto|sm_100a|sm_103a|sm_90a] [SHAPES='256x384x192']"
	@echo "make hint STEP=5 [TODO=k] [LEVEL=1|2|3] [TRACK=...]  help for a TODO: 1 idea, 2 API calls, 3 reference lines;"
	@echo "                                             no TODO: list the step's TODOs (TRACK=auto: the GPU's, else blackwell)"
	@echo "make inspect STEP=5 [IMPL=...] [TRACK=...] [SHAPES=MxNxK]  generated CUDA + the features found in it (no GPU needed)"
	@echo "make debug STEP=5 [IMPL=...] [TRACK=...] [SHAPES=...]  which warp waits on which barrier when a step hangs (GPU; without one: the barrier map)"
	@echo "make timeline STEP=8 [IMPL=...] [SHAPES=...] [TIMELINE_OUT=reports/timeline]  measured producer/consumer timeline of CTA 0: .json, .png (Hopper GPU; without one: what it would record)"
	@echo "make check STEP=5 [IMPL=...] [TRACK=...] [SHAPES=...]  run the step's barrier protocol on the CPU: deadlocks, stage races (no GPU needed)"
	@echo "make sanitize STEP=5 [IMPL=...] [SHAPES=...]  run the step once under compute-sanitizer racecheck + synccheck (GPU)"
	@echo "make bench [BENCH_OUT=reports/bench] [BENCH_TABLE=squares|models] [BENCH_TOKENS=128,256]  reference steps vs cuBLAS: squares, LLM layers (GPU)"
	@echo "make calibrate [STEP=all] [SHAPES=...] [MARGIN=0.5]  set the speed floors (grader/speed_floors.json) from the reference solutions on this GPU"
	@echo "make autograder                              build/autograder.zip: a Gradescope autograder (instructor mode; see README)"
	@echo "make grade-class SUBMISSIONS=dir OUT=dir [ENGINE=local|slurm] [TRACK=...] [STEPS='1 2'] [ONLY=sid] [FORCE=1] [CLASS_ARGS=...]"
	@echo "                                             grade a whole class on this machine's GPUs or on Slurm (see README)"
	@echo "make grade-class-status OUT=dir              how far a class's grade is"
	@echo "make test                                    the course's own tests (GPU tests skip without a GPU)"
	@echo "make notebooks [TRACK=hopper|blackwell]      Jupyter on notebooks/, the walk-throughs (TRACK: without a GPU)"
	@echo "make setup [WHEELS=dir]                      build .venv and install bubblewrap (done by the targets above when needed)"
	@echo "make wheelhouse                              download every wheel into ./wheelhouse for an offline setup"
	@echo "Add PYTHON=python3 to any target to use that interpreter instead of .venv."

setup: $(ENV_READY) sandbox

# The OS sandbox that confines student code (README, "How a step is graded"): Debian/Ubuntu's bubblewrap,
# installed with apt-get when missing and this is root; otherwise one line says what the grader does instead.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	        echo "setup: installing bubblewrap, the sandbox for student code"; \
	        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; } >/dev/null 2>&1 || \
	            echo "setup: apt-get could not install bubblewrap: student code will run as user nobody instead (see README)"; \
	    else \
	        echo "setup: bubblewrap is missing (install it as root: apt-get install bubblewrap); until then student code runs as user nobody when the grader is root, else unconfined"; \
	    fi; }

# A machine whose python3 already has torch (GPU clusters ship a CUDA build) lends it to the venv;
# elsewhere the venv gets the CPU build, pinned, so no loose requirement pulls gigabytes of CUDA wheels.
$(VENV)/.ready: requirements.txt
	@if python3 -c "import torch" 2>/dev/null; then \
	    echo "setup: reusing the torch of $$(command -v python3)"; \
	    python3 -m venv --system-site-packages $(VENV); \
	else \
	    python3 -m venv $(VENV); \
	fi
	$(VENV)/bin/python -m pip install --quiet $(PIP_SOURCE) -r requirements.txt
	@$(VENV)/bin/python -c "import torch" 2>/dev/null || \
	    $(VENV)/bin/python -m pip install --quiet $(PIP_SOURCE) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_CPU)"
	@touch $@

grade: $(ENV_READY) sandbox
	$(PYTHON) -m grader $(GRADER_ARGS)

hint: $(ENV_READY)
	@$(PYTHON) -m grader.commands.hint --step $(call quote,$(STEP)) --track $(call quote,$(TRACK)) --level $(call quote,$(LEVEL)) $(if $(TODO),--todo $(call quote,$(TODO)))

inspect: $(ENV_READY)
	$(PYTHON) -m grader.commands.inspect_step --step $(call quote,$(STEP)) --impl $(call quote,$(IMPL)) --track $(call quote,$(TRACK)) --arch $(call quote,$(ARCH)) \
	    $(if $(SHAPES),--shape $(call quote,$(firstword $(SHAPES))))

debug: $(ENV_READY)
	$(PYTHON) -m grader.commands.debug --step $(call quote,$(STEP)) --impl $(call quote,$(IMPL)) --track $(call quote,$(TRACK)) --arch $(call quote,$(ARCH)) $(if $(SHAPES),--shape $(call quote,$(firstword $(SHAPES))))

TIMELINE_OUT ?= reports/timeline-step$(STEP)
timeline: $(ENV_READY)
	$(PYTHON) -m grader.commands.timeline --step $(call quote,$(STEP)) --impl $(call quote,$(IMPL)) --track hopper $(if $(SHAPES),--shape $(call quote,$(firstword $(SHAPES)))) --out $(call quote,$(TIMELINE_OUT).json) --png $(call quote,$(TIMELINE_OUT).png)

check: $(ENV_READY)
	@$(PYTHON) -m grader.commands.check --step $(call quote,$(STEP)) --impl $(call quote,$(IMPL)) --track $(call quote,$(TRACK)) $(foreach s,$(SHAPES),--shape $(call quote,$(s)))

SANITIZE_RUN = $(PYTHON) -m grader.commands.run_kernel --step $(call quote,$(STEP)) --impl $(call quote,$(IMPL)) $(if $(SHAPES),--shape $(call quote,$(firstword $(SHAPES))))
sanitize: $(ENV_READY)
	compute-sanitizer --tool racecheck --error-exitcode 1 $(SANITIZE_RUN)
	compute-sanitizer --tool synccheck --error-exitcode 1 $(SANITIZE_RUN)

bench: $(ENV_READY)
	$(PYTHON) -m grader.commands.bench $(if $(BENCH_OUT),--out '$(BENCH_OUT)') $(if $(BENCH_TABLE),--table $(call quote,$(BENCH_TABLE))) \
	    $(if $(BENCH_TOKENS),--tokens $(call quote,$(BENCH_TOKENS)))

calibrate: $(ENV_READY)
	@$(PYTHON) -m grader.commands.calibrate --step $(call quote,$(STEP)) $(foreach s,$(SHAPES),--shape $(call quote,$(s))) \
	    $(if $(MARGIN),--margin $(call quote,$(MARGIN)))

autograder: $(ENV_READY)
	$(PYTHON) -m grader.commands.autograder package --out build/autograder.zip

ENGINE ?= local
STEPS ?= all
grade-class: $(ENV_READY) sandbox
	$(PYTHON) -m grader.commands.grade_class grade $(call quote,$(SUBMISSIONS)) --out $(call quote,$(OUT)) \
	    --engine $(call quote,$(ENGINE)) --track $(call quote,$(TRACK)) --steps $(call quote,$(STEPS)) \
	    $(foreach s,$(ONLY),--only $(call quote,$(s))) $(if $(FORCE),--force) $(CLASS_ARGS)

grade-class-status: $(ENV_READY)
	@$(PYTHON) -m grader.commands.grade_class status $(call quote,$(OUT))

# Two pytest runs. First tests/test_grade_class.py alone: it grades up to four students at once and fails if one
# not meant to hang passes its 120 s limit (a limit that cannot grow: its hanging student must reach it before the
# grader's 120 s build limit does); beside another test worker they took up to 77 s. Then the other files on a
# worker per core (pytest-xdist -n auto; one alone where a GPU is: tests/conftest.py), each file whole on one
# worker, in order (--dist loadfile: test_autograder's module fixture writes build/autograder.zip of this checkout,
# test_notebooks' last test counts the figures its notebooks drew in that process), but for the files of
# tests/conftest.py's SPREAD_FILES, whose tests go to the workers one by one (the known-bad grades alone are 24
# minutes of one worker). Without pytest-xdist (an interpreter given as PYTHON=...), one run of them all.
ALONE_TESTS = tests/test_grade_class.py
test: $(ENV_READY) sandbox
	@if $(PYTHON) -c "import xdist" 2>/dev/null; then \
	    echo "$(PYTHON) -m pytest $(ALONE_TESTS)"; \
	    $(PYTHON) -m pytest $(ALONE_TESTS); alone=$$?; \
	    echo "$(PYTHON) -m pytest -n auto --dist loadfile $(foreach t,$(ALONE_TESTS),--ignore $(t)) tests"; \
	    $(PYTHON) -m pytest -n auto --dist loadfile $(foreach t,$(ALONE_TESTS),--ignore $(t)) tests; rest=$$?; \
	    [ $$alone = 0 ] || exit $$alone; exit $$rest; \
	else \
	    echo "$(PYTHON) -m pytest tests"; $(PYTHON) -m pytest tests; \
	fi

notebooks: $(ENV_READY)
	@$(PYTHON) -c "import jupyterlab" 2>/dev/null || $(PYTHON) -c "import notebook" 2>/dev/null || \
	    { echo "make notebooks: Jupyter is not installed; install it with: $(PYTHON) -m pip install jupyterlab"; exit 1; }
	COURSE_TRACK=$(call quote,$(TRACK)) $(PYTHON) -m $$($(PYTHON) -c "import jupyterlab" 2>/dev/null && echo jupyterlab || echo notebook) --notebook-dir=notebooks

wheelhouse:
	python3 -m pip download -d wheelhouse -r requirements.txt
	python3 -m pip download -d wheelhouse $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_CPU)"

clean:
	rm -rf $(VENV) reports build
