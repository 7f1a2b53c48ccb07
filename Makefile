# legorl: a thin Makefile over the go tool. `make help` lists the targets.

GO       ?= go
CACHE    := $(CURDIR)/.cache
BIN      := $(CURDIR)/bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)

# Pinned test services and tools.
VERSITYGW_VERSION := v1.8.0
VERSITYGW         := $(CACHE)/bin/versitygw
VERSITYGW_STAMP   := $(CACHE)/versitygw-$(VERSITYGW_VERSION).stamp
# MinIO (AGPL-3.0) is built from its Go module and run only as a separate
# test server binary by make test-minio; no legorl package imports it. Its
# releases are tags (RELEASE.2025-10-15T17-29-55Z, the last), not semver, so
# the module is pinned by pseudo-version: master at 7aac2a2c5b7c
# (2026-02-12), the release plus eleven commits (README and docs, and
# conditional-put and multipart-response fixes). The Go module proxy
# answered 403 for the release commit's own pseudo-version.
MINIO_VERSION     := v0.0.0-20260212201848-7aac2a2c5b7c
MINIO             := $(CACHE)/bin/minio
MINIO_STAMP       := $(CACHE)/minio-$(MINIO_VERSION).stamp
DUCKDB_STAMP      := tools/duckdb/node_modules/.legorl-installed
TOKREF_STAMP      := tools/tokenizer-ref/node_modules/.legorl-installed
HARNESS_STAMP     := tools/harnesses/node_modules/.legorl-installed
NOTEBOOK_STAMP    := $(CACHE)/notebook-debs.stamp
NOTEBOOK_DEBS     := jupyter-notebook jupyter-nbconvert jupyter-client python3-ipykernel python3-pandas python3-matplotlib

FUZZTIME ?= 20s
# make test bounds its fuzzing by executions, not time: a time budget races
# Go's fuzz coordinator on a loaded machine and fails with a bare "context
# deadline exceeded" and no reproducer (golang/go#75804).
TEST_FUZZEXECS ?= 20000x

.DEFAULT_GOAL := help
.PHONY: help demo starter chaos test test-harnesses test-minio build tools lint fuzz bench clean jinja-ref torch-ref pytest-ref docker-up docker-down bench-deps bench-sgemm bench-train bench-update bench-loop cuda-headers cuda-build cuda-emu ptx ptx-check device-bundle device-check

help: ## list the targets
	@grep -E '^[a-zA-Z_%/-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | awk -F'\t' '{printf "  make %-8s %s\n", $$1, $$2}'

demo: build pytest-ref ## the main job on embedded defaults: 28 RL iterations of the bash agent from the committed starter checkpoint on the built-in suite, with the before/after table (about 10 minutes); resumes if interrupted
	$(BIN)/legorl run --store file://./legorl-data --work ./legorl-work/demo-rl

# The starter checkpoints (policy/starter): the SFT stage of a results
# config, committed so RL runs and the demo start from it ("policy":
# "starter:NAME"). bash-sft is the SFT of docs/results/bash-pools.json,
# bash-sed that of docs/results/bash-sed.json, bash-early that of
# docs/results/bash-early.json (bash-sed's SFT stopped after 12 epochs:
# 15 min), tools-sft that of
# docs/results/tools-raft.json, tools-copy that of docs/results/tools-copy.json
# (tools-sft's SFT with copy drills: 16 min), tools-induct that of
# docs/results/tools-induct.json (with drills of random layouts: 29 min
# beside other work, after the demonstrations),
# pi-sft that of docs/results/pi-raft-lr3.json
# (it needs Node.js). `make starter [STARTER=NAME]` runs that SFT again
# (on 2 cores: 47 min for pi-sft; the SFT stage of its config took about
# 18 min for tools-sft and 37 for bash-sft, as docs/RESULTS.md records) and
# checks the bytes against policy/starter/NAME.sha256: the CPU backend's
# SFT is deterministic for a given binary and CPU feature set (AVX-512 or
# not); a mismatch installs nothing and says so. It runs under the config's
# own run name, which seeds the choice of the SFT probe's tasks.
STARTER ?= bash-sft
STARTER_CONFIG_bash-sft := docs/results/bash-pools.json
STARTER_CONFIG_bash-sed := docs/results/bash-sed.json
STARTER_CONFIG_bash-early := docs/results/bash-early.json
STARTER_CONFIG_tools-sft := docs/results/tools-raft.json
STARTER_CONFIG_tools-copy := docs/results/tools-copy.json
STARTER_CONFIG_tools-induct := docs/results/tools-induct.json
STARTER_CONFIG_pi-sft := docs/results/pi-raft-lr3.json
starter: build ## remake a committed starter checkpoint (STARTER=bash-sft, bash-sed, bash-early, tools-sft, tools-copy, tools-induct or pi-sft: the SFT of its results config) and check its sha256
	@test -n "$(STARTER_CONFIG_$(STARTER))" || { echo "starter: STARTER=$(STARTER): no such starter (bash-sft, bash-sed, bash-early, tools-sft, tools-copy, tools-induct, pi-sft)" >&2; exit 2; }
	rm -rf legorl-work/starter-$(STARTER)
	$(BIN)/legorl run --config $(STARTER_CONFIG_$(STARTER)) --work legorl-work/starter-$(STARTER) \
		--store file://$(CURDIR)/legorl-work/starter-$(STARTER)/store --prepare-only
	scripts/starter-install legorl-work/starter-$(STARTER)/checkpoints/sft policy/starter/$(STARTER)

# The docker sandbox tests use a private Docker Engine under .cache/docker
# (no bridge, no iptables) and a base image built locally with debootstrap.
DOCKER_SOCK := $(CACHE)/docker/docker.sock
export LEGORL_DOCKER_HOST := unix://$(DOCKER_SOCK)

test: tools lint cuda-build ptx-check cuda-emu ## the whole suite: installs and starts what it needs (versitygw, DuckDB, Docker Engine, ...), unit + integration tests, the seed corpus of every fuzz target and a bounded fuzz run of the Parquet reader and the proxy's request parsers
	scripts/docker/start-dockerd.sh >/dev/null
	DOCKER_HOST=$(LEGORL_DOCKER_HOST) scripts/docker/base-image.sh
	$(GO) test -count=1 -timeout 40m ./... ; rc=$$?; scripts/docker/stop-dockerd.sh; exit $$rc
	LEGORL_TEST_INIT=go $(GO) test -count=1 ./sandbox/local
	LEGORL_NOTEBOOKS=1 $(GO) test -count=1 -timeout 20m -run '^TestNotebooks$$' ./cmd/legorl
	$(GO) test -count=1 -tags purego ./policy/kernels
	@set -e; for t in $(TEST_FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(TEST_FUZZEXECS) -fuzzminimizetime 100x $$pkg; done

# The npm harnesses (pi, Codex, OpenCode, Claude Code, qwen-code), pinned in
# tools/harnesses/package.json, each run through a whole rollout inside the
# local sandbox against the proxy. LEGORL_HARNESSES=1 turns a missing or
# broken harness into a failure, not a skip.
# npm install, not the npm ci of the rule above: npm leaves the other
# platforms' optional packages (opencode-darwin-arm64, ...) out of the lock
# file and npm ci then refuses it. package.json pins exact versions.
$(HARNESS_STAMP): tools/harnesses/package.json
	@scripts/setup node
	cd tools/harnesses && npm install --no-audit --no-fund --loglevel=error
	@touch $@

test-harnesses: $(HARNESS_STAMP) pytest-ref ## install the pinned npm harnesses and run each through rollouts in the local sandbox
	LEGORL_HARNESSES=1 LEGORL_HARNESS_CACHE=$(CURDIR)/tools/harnesses $(GO) test -count=1 -timeout 30m -run '^TestHarness' ./harness/... ./rollout ./cmd/legorl

# The S3 tests on MinIO instead of versitygw: the storage conformance and
# fault tests (all of ./storage but DuckDB and the full disk, which touch
# no S3) and one legorl rollout + train + audit (cmd/legorl
# TestRolloutTrainOnS3). LEGORL_TEST_S3_SERVER=minio makes a missing or
# broken MinIO a failure, not a fallback. Building MinIO takes about 15 min
# on 2 cores the first time; the binary is cached in .cache/bin.
test-minio: $(MINIO_STAMP) ## build the pinned MinIO into .cache/bin and run the S3 storage tests and one legorl rollout + train against it
	LEGORL_TEST_S3_SERVER=minio LEGORL_MINIO=$(MINIO) $(GO) test -count=1 -timeout 20m -skip '^(TestDuckDB|TestDiskFull)' ./storage/...
	LEGORL_TEST_S3_SERVER=minio LEGORL_MINIO=$(MINIO) $(GO) test -count=1 -timeout 10m -run '^(TestRolloutTrainOnS3|TestDemoAndExportOnS3)$$' ./cmd/legorl

# Every fuzz target, as package:target; each runs for FUZZTIME. `make test` runs
# their seed corpora (go test does) and fuzzes only TEST_FUZZ_TARGETS, the
# parsers of untrusted input (Parquet files, API requests from harnesses); run
# `make fuzz FUZZTIME=5m` before a release: a new finding there fails the run,
# and CI is not the place to discover it.
TEST_FUZZ_TARGETS := ./storage:FuzzDecodeFile ./proxy:FuzzDecodeChat ./proxy:FuzzScanChat ./proxy:FuzzDecodeResponses ./proxy:FuzzDecodeMessages
FUZZ_TARGETS := ./storage:FuzzDecodeFile ./policy/chat:FuzzQwen3Parse ./policy/chat:FuzzQwen3CoderParse ./policy/chat:FuzzPyJSON ./policy/tokenizer:FuzzEncodeDecode ./policy/tokenizer:FuzzParse \
	./policy/safetensors:FuzzParseHeader ./policy/model:FuzzParseConfig ./policy/kernels:FuzzSgemm \
	./sandbox/docker:FuzzExtractTar ./sandbox/local/initproc:FuzzDecode ./tasks:FuzzParsePatch \
	./proxy:FuzzDecodeChat ./proxy:FuzzScanChat ./proxy:FuzzDecodeResponses ./proxy:FuzzDecodeMessages ./proxy:FuzzUnquoteJSON \
	./policy/remote:FuzzDecodeNPY ./policy/remote:FuzzSSE ./policy/remote:FuzzSanitize ./policy/remote:FuzzResponses

chaos: ## kill a small legorl run at a point of every stage, resume it each time, and compare its store with an uninterrupted run's (also part of make test)
	$(GO) test -count=1 -run '^TestChaosResume(Gradients)?$$' -v ./cmd/legorl

fuzz: ## run every fuzz target for FUZZTIME each (default 20s)
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 100x $$pkg; done

build: $(BIN)/legorl $(BIN)/legorl-agent $(BIN)/legorl-sandbox-init ## build bin/legorl, the static built-in agent bin/legorl-agent and the static sandbox init bin/legorl-sandbox-init

# The agent runs inside sandboxes and images of any libc: build it static.
$(BIN)/legorl-agent: export CGO_ENABLED=0
# The local sandbox backend's spawner and sandbox init, in C, static
# (cmd/legorl-sandbox-init/init.c; package sandbox/local/initproc is the Go
# one a host binary falls back to).
$(BIN)/legorl-sandbox-init: cmd/legorl-sandbox-init/init.c sandbox/local/initproc/version_linux.go | /usr/bin/cc
	@mkdir -p $(BIN)
	scripts/lib/build-init.sh . $@

/usr/bin/cc:
	scripts/setup deb gcc libc6-dev

$(BIN)/%: FORCE
	$(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/$*

FORCE:

tools: /usr/bin/cc $(VERSITYGW_STAMP) $(DUCKDB_STAMP) $(TOKREF_STAMP) $(NOTEBOOK_STAMP) jinja-ref torch-ref pytest-ref /usr/bin/bwrap /usr/bin/chromedriver /usr/bin/prometheus ## install the test services and tools into .cache and tools/ (idempotent)

$(VERSITYGW_STAMP):
	@echo "installing versitygw $(VERSITYGW_VERSION) into $(CACHE)/bin (a few minutes the first time)"
	@mkdir -p $(CACHE)/bin
	GOBIN=$(CACHE)/bin $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)
	@touch $@

$(MINIO_STAMP):
	@echo "building MinIO $(MINIO_VERSION) into $(CACHE)/bin (about 15 min on 2 cores the first time)"
	@mkdir -p $(CACHE)/bin
	GOBIN=$(CACHE)/bin $(GO) install github.com/minio/minio@$(MINIO_VERSION)
	@touch $@

# npm-based references: tools/NAME/node_modules/.legorl-installed is the stamp.
tools/%/node_modules/.legorl-installed: tools/%/package.json tools/%/package-lock.json
	@scripts/setup node
	cd tools/$* && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# Debian's python3-jinja2: the chat-template reference of the policy/chat tests.
# /usr/bin/python3 on purpose: the python3 on PATH may be another install.
jinja-ref:
	@/usr/bin/python3 -c 'import jinja2' 2>/dev/null || scripts/setup deb-full python3-jinja2

# Debian's pytest and git: the grader runs /usr/bin/python3 -m pytest inside the sandbox.
pytest-ref:
	@/usr/bin/python3 -c 'import pytest' 2>/dev/null && command -v git >/dev/null || scripts/setup deb python3-pytest git

# Debian's headless Chromium and its driver: the browser of the dashboard's
# tests (monitor/browser_test.go, over the DevTools protocol), which fail
# without it when CI=true. Their screenshots go to $(LEGORL_TEST_ARTIFACTS)/monitor.
export LEGORL_TEST_ARTIFACTS ?= $(CACHE)/artifacts
/usr/bin/chromedriver:
	scripts/setup deb chromium chromium-driver

dashboard-png: /usr/bin/chromedriver ## rewrite docs/img/dashboard.png from the dashboard's browser test
	$(GO) test -count=1 -run '^TestBrowser$$' ./monitor -update-screenshot

# Debian's Jupyter, pandas and matplotlib: `make test` executes every notebook
# in notebooks/ headless with them (cmd/legorl TestNotebooks, /usr/bin/python3).
$(NOTEBOOK_STAMP):
	@scripts/setup deb $(NOTEBOOK_DEBS)
	@mkdir -p $(CACHE) && touch $@

# Debian's Prometheus: cmd/legorl TestPrometheus scrapes legorl serve and
# legorl run --metrics-addr with it and runs the Grafana dashboard's queries.
/usr/bin/prometheus:
	scripts/setup deb prometheus

# bubblewrap: the anchor of the local sandbox benchmark.
/usr/bin/bwrap:
	scripts/setup deb bubblewrap

# Debian's python3-torch: the independent Qwen3 implementation (tools/model-ref)
# that the policy/model tests compare logprobs, routing and gradients with.
torch-ref:
	@/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null || scripts/setup deb-full python3-torch python3-numpy

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench: tools docker-up ## run the benchmarks (see docs/PERFORMANCE.md)
	$(GO) test -run '^$$' -bench . -benchmem ./... ; rc=$$?; scripts/docker/stop-dockerd.sh; exit $$rc

bench-deps: ## Debian packages for the PyTorch/OpenBLAS anchors in bench/
	@scripts/setup deb-full python3-numpy python3-torch libopenblas0-pthread python3-threadpoolctl

bench-sgemm: bench-deps ## Sgemm vs FMA peak, gonum, OpenBLAS and PyTorch, same run
	$(GO) test -run '^$$' -bench 'FMAPeak|MicroKernel|Sgemm/.*/(legorl|gonum|kernel=avx2)/' -count 3 ./policy/kernels
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/sgemm_ref.py --count 3

bench-train: bench-deps ## tiny-config training step and logprob forward: Go model vs PyTorch, alternating in one run, per CPU-second
	/usr/bin/python3 bench/model_side_by_side.py --rounds 3 --threads 1,2

bench-update: build ## seconds of an RL update of 256 tools rollouts with and without train.shared_prefix, alternating in one run
	bench/train.sh

bench-loop: ## rollouts/min of a fixed legorl run iteration (bash starter, 16 tasks x G=8): this tree vs BASE (default 749b4ce), alternating in one run
	bench/loop.sh $(BASE)

docker-up: ## start the private Docker Engine (.cache/docker) and build the sandbox base image
	scripts/docker/start-dockerd.sh >/dev/null
	DOCKER_HOST=$(LEGORL_DOCKER_HOST) scripts/docker/base-image.sh

docker-down: ## stop the private Docker Engine
	scripts/docker/stop-dockerd.sh

clean: ## remove build outputs and the demo store (keeps .cache)
	rm -rf $(BIN) legorl-data

# The CUDA backend (policy/backend/cuda, build tag cuda). CI has no GPU:
# `make test` compiles it against the CUDA 12.x headers and libcuda stub of
# Debian's nvidia-cuda-dev (.cache/cuda-12, scripts/cuda/headers.sh) so it
# never rots, and checks that the committed PTX is what kernels.cu compiles
# to. gorgonia.org/cu's #cgo lines look in /usr/local/cuda; CGO_CFLAGS and
# CGO_LDFLAGS point it (and the backend's own cgo) at .cache/cuda-12.
# CUDA_PKGS lists the packages with cuda-tagged files.
CUDA_DIR   := $(CACHE)/cuda-12
CUDA_STAMP := $(CUDA_DIR)/.stamp
CUDA_ENV   := CGO_CFLAGS="-I$(CUDA_DIR)/include" CGO_LDFLAGS="-L$(CUDA_DIR)/lib"
CUDA_PKGS  := ./policy/backend/... ./cmd/legorl
DEVICE_DIR := $(CACHE)/device

$(CUDA_STAMP):
	scripts/cuda/headers.sh $(CUDA_DIR)

cuda-headers: $(CUDA_STAMP) ## the CUDA 12.x headers and libcuda stub the cuda build tag compiles against (Debian nvidia-cuda-dev, into .cache/cuda-12)

cuda-build: $(CUDA_STAMP) ## compile the CUDA backend (-tags cuda) without a GPU: go vet and its test binary .cache/device/cuda.test
	$(CUDA_ENV) $(GO) vet -tags cuda $(CUDA_PKGS)
	@mkdir -p $(DEVICE_DIR)
	$(CUDA_ENV) $(GO) test -c -tags cuda -o $(DEVICE_DIR)/cuda.test ./policy/backend/cuda
	$(CUDA_ENV) $(GO) build -tags cuda -o /dev/null ./cmd/legorl

cuda-emu: $(CUDA_STAMP) ## run the CUDA backend's tests on the CPU: the real kernels.cu and Go code under a host emulator of the GPU, driver and cuBLAS (scripts/cuda/emu.sh)
	scripts/cuda/emu.sh

ptx: ## recompile the CUDA kernels (policy/backend/cuda/kernels/kernels.cu) to the committed kernels.ptx with clang-14
	scripts/cuda/ptx.sh

ptx-check: ## fail if kernels.ptx is not what kernels.cu compiles to
	scripts/cuda/ptx.sh check

device-bundle: $(CUDA_STAMP) ## build what a GPU machine runs into .cache/device: the stripped CUDA test binary and device-check.sh
	scripts/cuda/device-check.sh bundle

device-check: device-bundle ## CUDA-vs-CPU equivalence, MoE replay and benchmarks on a GPU, recorded in docs/PERFORMANCE.md (here if nvidia-smi works, else prints how to run it on a machine with a GPU)
	@if nvidia-smi >/dev/null 2>&1; then \
		OUT=$(DEVICE_DIR)/out scripts/cuda/device-check.sh run && scripts/cuda/device-check.sh record $(DEVICE_DIR)/out; \
	else \
		echo "no GPU here: on a machine with a GPU run 'bash scripts/cuda/device-check.sh run' from a copy of the repository with .cache/device, then 'scripts/cuda/device-check.sh record DIR' here with DIR the files it wrote"; \
	fi
