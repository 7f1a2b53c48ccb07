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
# MinIO (AGPL-3.0), by Go module pseudo-version: built into .cache/bin and
# run only as a separate test server by make test-minio; no legorl package
# imports it.

MINIO_VERSION     := v0.0.0-20260212201848-7aac2a2c5b7c
MINIO             := $(CACHE)/bin/minio
MINIO_STAMP       := $(CACHE)/minio-$(MINIO_VERSION).stamp
DUCKDB_STAMP      := tools/duckdb/node_modules/.legorl-installed
TOKREF_STAMP      := tools/tokenizer-ref/node_modules/.legorl-installed
HARNESS_STAMP     := tools/harnesses/node_modules/.legorl-installed
NOTEBOOK_STAMP    := $(CACHE)/notebook-debs.stamp
NOTEBOOK_DEBS     := jupyter-notebook jupyter-nbconvert jupyter-client python3-ipykernel python3-pandas python3-matplotlib

FUZZTIME ?= 20s
# The executions each of TEST_FUZZ_TARGETS is fuzzed for in make test.

TEST_FUZZEXECS ?= 20000x

.DEFAULT_GOAL := help
.PHONY: help demo starter results results-check chaos test test-harnesses test-minio build tools lint fuzz bench clean jinja-ref torch-ref pytest-ref docker-up docker-down bench-deps bench-sgemm bench-train bench-update bench-loop cuda-headers cuda-build cuda-emu ptx ptx-check device-bundle device-check test-cluster init-lint init-fuzz test-init-asan $(addprefix bench-,$(BENCH))

help: ## list the targets
	@grep -E '^[a-zA-Z_%/-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | awk -F'\t' '{printf "  make %-15s %s\n", $$1, $$2}'

demo: build pytest-ref ## the main job on embedded defaults: RL of the bash agent from the committed starter checkpoint on the built-in suite, with the before/after table on validation and test tasks and the committed replicates' spread; resumes if interrupted
	$(BIN)/legorl run --store file://./legorl-data --work ./legorl-work/demo-rl --replicates 'docs/results/demo-rep-*.summary.json'

# The starter checkpoints (policy/starter, "policy": "starter:NAME" in a
# loop config) are the SFT stage of the results config STARTER_CONFIG_NAME
# (pi-sft's needs Node.js). `make starter [STARTER=NAME]` runs that SFT
# again under the config's run name and installs it only if its bytes
# match policy/starter/NAME.sha256 (the CPU backend's SFT is deterministic
# for a given binary and CPU feature set); a mismatch installs nothing and
# says so.

STARTER ?= bash-sft
STARTER_CONFIG_bash-sft := docs/results/bash-pools.json
STARTER_CONFIG_bash-sed := docs/results/bash-sed.json
STARTER_CONFIG_bash-early := docs/results/bash-early.json
STARTER_CONFIG_tools-sft := docs/results/tools-raft.json
STARTER_CONFIG_tools-copy := docs/results/tools-copy.json
STARTER_CONFIG_tools-induct := docs/results/tools-induct.json
STARTER_CONFIG_pi-sft := docs/results/pi-raft-lr3.json
STARTER_CONFIG_codex-induct := docs/results/codex-induct.json
STARTER_CONFIG_opencode-induct := docs/results/opencode-induct.json
starter: build ## remake a committed starter checkpoint (STARTER=bash-sft, bash-sed, bash-early, tools-sft, tools-copy, tools-induct, pi-sft, codex-induct or opencode-induct: the SFT of its results config) and check its sha256
	@test -n "$(STARTER_CONFIG_$(STARTER))" || { echo "starter: STARTER=$(STARTER): no such starter (bash-sft, bash-sed, bash-early, tools-sft, tools-copy, tools-induct, pi-sft, codex-induct, opencode-induct)" >&2; exit 2; }
	rm -rf legorl-work/starter-$(STARTER)
	$(BIN)/legorl run --config $(STARTER_CONFIG_$(STARTER)) --work legorl-work/starter-$(STARTER) \
		--store file://$(CURDIR)/legorl-work/starter-$(STARTER)/store --prepare-only
	scripts/starter-install legorl-work/starter-$(STARTER)/checkpoints/sft policy/starter/$(STARTER)

# The docker sandbox tests use a private Docker Engine under .cache/docker
# (no bridge, no iptables) and a base image built locally with debootstrap.
DOCKER_SOCK := $(CACHE)/docker/docker.sock
export LEGORL_DOCKER_HOST := unix://$(DOCKER_SOCK)

test: tools lint init-lint init-fuzz cuda-build ptx-check cuda-emu ## the whole suite: installs and starts what it needs (versitygw, DuckDB, Docker Engine, ...), unit + integration tests, the seed corpus of every fuzz target and a bounded fuzz run of the Parquet reader and the proxy's request parsers
	scripts/docker/start-dockerd.sh >/dev/null
	DOCKER_HOST=$(LEGORL_DOCKER_HOST) scripts/docker/base-image.sh
	$(GO) test -count=1 -timeout 40m ./... ; rc=$$?; scripts/docker/stop-dockerd.sh; exit $$rc
	$(MAKE) test-init-asan
	LEGORL_NOTEBOOKS=1 $(GO) test -count=1 -timeout 20m -run '^TestNotebooks$$' ./cmd/legorl
	$(GO) test -count=1 -tags purego ./policy/kernels
	@set -e; for t in $(TEST_FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(TEST_FUZZEXECS) -fuzzminimizetime 100x $$pkg; done

# The npm harnesses (pi, Codex, OpenCode, Claude Code, qwen-code), at the
# exact versions of tools/harnesses/package.json (npm install: the lock file
# lacks other platforms' optional packages, which npm ci refuses), each run
# through a whole rollout inside the local sandbox against the proxy.
# LEGORL_HARNESSES=1 turns a missing or broken harness into a failure.
# libfaketime pins OpenCode's wall clock (harness/clock.go).
$(HARNESS_STAMP): tools/harnesses/package.json
	@scripts/setup node
	@scripts/setup deb libfaketime
	cd tools/harnesses && npm install --no-audit --no-fund --loglevel=error
	@touch $@

test-harnesses: $(HARNESS_STAMP) pytest-ref ## install the pinned npm harnesses and run each through rollouts in the local sandbox
	LEGORL_HARNESSES=1 LEGORL_HARNESS_CACHE=$(CURDIR)/tools/harnesses $(GO) test -count=1 -timeout 30m -run '^TestHarness' ./harness/... ./rollout ./cmd/legorl

# The S3 tests on MinIO instead of versitygw: the storage conformance and
# fault tests (all of ./storage but DuckDB and the full disk, which touch
# no S3) and one legorl rollout + train + audit (cmd/legorl
# TestRolloutTrainOnS3). LEGORL_TEST_S3_SERVER=minio makes a missing or
# broken MinIO a failure, not a fallback.

test-minio: $(MINIO_STAMP) ## build the pinned MinIO into .cache/bin and run the S3 storage tests and one legorl rollout + train against it
	LEGORL_TEST_S3_SERVER=minio LEGORL_MINIO=$(MINIO) $(GO) test -count=1 -timeout 20m -skip '^(TestDuckDB|TestDiskFull)' ./storage/...
	LEGORL_TEST_S3_SERVER=minio LEGORL_MINIO=$(MINIO) $(GO) test -count=1 -timeout 10m -run '^(TestRolloutTrainOnS3|TestDemoAndExportOnS3)$$' ./cmd/legorl

# The production topology on hosts of its own (cmd/legorl TestCluster):
# network namespaces on a bridge, as root, with the store (MinIO), the job
# server, two worker hosts and the trainer each on its own address; two RL
# iterations of the bash agent across them, an iteration with the store
# host cut off for 10 s, one with a worker host killed, then an audit of
# the run in MinIO. Every namespace and process is torn down, also on
# failure. See docs/DEPLOY.md.
test-cluster: $(MINIO_STAMP) ## two RL iterations and two faults across network-namespace hosts (store on MinIO, job server, two workers, trainer); needs root
	LEGORL_TEST_CLUSTER=1 LEGORL_MINIO=$(MINIO) $(GO) test -count=1 -timeout 20m -run '^TestCluster$$' -v ./cmd/legorl

# Every fuzz target, as package:target; make fuzz runs each for FUZZTIME.
# make test runs their seed corpora (go test does) and fuzzes only
# TEST_FUZZ_TARGETS, the parsers of untrusted input (Parquet files, API
# requests from harnesses).

TEST_FUZZ_TARGETS := ./storage:FuzzDecodeFile ./proxy:FuzzDecodeChat ./proxy:FuzzScanChat ./proxy:FuzzDecodeResponses ./proxy:FuzzDecodeMessages
FUZZ_TARGETS := ./storage:FuzzDecodeFile ./policy/chat:FuzzQwen3Parse ./policy/chat:FuzzQwen3CoderParse ./policy/chat:FuzzPyJSON ./policy/tokenizer:FuzzEncodeDecode ./policy/tokenizer:FuzzParse \
	./policy/safetensors:FuzzParseHeader ./policy/model:FuzzParseConfig ./policy/kernels:FuzzSgemm \
	./sandbox/docker:FuzzExtractTar ./sandbox/local/initproc:FuzzDecode ./tasks:FuzzParsePatch \
	./proxy:FuzzDecodeChat ./proxy:FuzzScanChat ./proxy:FuzzDecodeResponses ./proxy:FuzzDecodeMessages ./proxy:FuzzUnquoteJSON \
	./policy/remote:FuzzDecodeNPY ./policy/remote:FuzzSSE ./policy/remote:FuzzSanitize ./policy/remote:FuzzResponses

chaos: ## kill a small legorl run at a point of every stage, resume it each time, and compare its store with an uninterrupted run's (also part of make test)
	$(GO) test -count=1 -run '^TestChaosResume(Gradients)?$$' -v ./cmd/legorl

fuzz: ## run every fuzz target for FUZZTIME each (default 20s), and the C sandbox init's for INIT_FUZZ_LONG
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 100x $$pkg; done
	$(MAKE) init-fuzz INIT_FUZZ_ARGS=$(INIT_FUZZ_LONG)

# The sandbox init, the sandbox's security boundary, is C
# (sandbox/local/initproc/c/init.c): make test checks it with cppcheck
# (init-lint), runs the libFuzzer target of its request decoder for a
# bounded number of executions from the seed corpus of the real protocol
# (init-fuzz; make fuzz runs it for INIT_FUZZ_LONG) and runs sandbox/local's
# whole suite once with an AddressSanitizer + UndefinedBehaviorSanitizer
# build of the init (test-init-asan). Inputs the fuzzer finds go to
# $(CACHE)/init-fuzz, never into the committed corpus.
INIT_C          := sandbox/local/initproc/c
INIT_SRC        := $(INIT_C)/init.c $(INIT_C)/tables.h
INIT_FUZZ       := $(BIN)/legorl-init-fuzz
INIT_FUZZ_ARGS  ?= -runs=20000
INIT_FUZZ_LONG  ?= -max_total_time=300
CLANG_STAMP     := $(CACHE)/clang-debs.stamp
CPPCHECK_STAMP  := $(CACHE)/cppcheck-debs.stamp

$(CLANG_STAMP):
	scripts/setup deb clang libclang-rt-dev
	@mkdir -p $(@D) && touch $@

$(CPPCHECK_STAMP):
	scripts/setup deb cppcheck
	@mkdir -p $(@D) && touch $@

init-lint: $(CPPCHECK_STAMP) ## cppcheck the C sandbox init and its fuzz target: any finding fails
	cppcheck --enable=warning,style,performance,portability --std=c11 --error-exitcode=1 --inline-suppr -q \
		--template='{file}:{line}: {severity}: {message} [{id}]' \
		-DLEGORL_INIT_VERSION='"lint"' -D__x86_64__ -D__linux__ -I$(INIT_C) $(INIT_C)/init.c $(INIT_C)/fuzz.c

$(INIT_FUZZ): $(INIT_SRC) $(INIT_C)/fuzz.c | $(CLANG_STAMP)
	@mkdir -p $(@D)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Wall -Wextra -Werror -Wno-unused-function \
		-DLEGORL_INIT_VERSION='"fuzz"' -o $@ $(INIT_C)/fuzz.c

init-fuzz: $(INIT_FUZZ) ## fuzz the C sandbox init's request decoder (libFuzzer, ASan, UBSan): INIT_FUZZ_ARGS (default -runs=20000) from its seed corpus
	@mkdir -p $(CACHE)/init-fuzz/found
	$(INIT_FUZZ) $(INIT_FUZZ_ARGS) -artifact_prefix=$(CACHE)/init-fuzz/ $(CACHE)/init-fuzz/found $(INIT_C)/corpus

test-init-asan: $(CLANG_STAMP) ## run sandbox/local's suite with an ASan + UBSan build of the sandbox init (root)
	LEGORL_TEST_INIT=asan $(GO) test -count=1 ./sandbox/local

build: $(BIN)/legorl $(BIN)/legorl-agent $(BIN)/legorl-sandbox-init ## build bin/legorl, the static built-in agent bin/legorl-agent and the static sandbox init bin/legorl-sandbox-init

# The agent runs inside sandboxes and images of any libc: build it static.
$(BIN)/legorl-agent: export CGO_ENABLED=0
# The local sandbox backend's spawner and sandbox init, in C, static
# (sandbox/local/initproc/c/init.c, the only implementation): the local
# backend starts the one beside bin/legorl and refuses to run without it.
$(BIN)/legorl-sandbox-init: $(INIT_SRC) scripts/lib/build-init.sh | /usr/bin/cc
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
	@echo "building MinIO $(MINIO_VERSION) into $(CACHE)/bin (once; it takes a while)"
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

results: ## write docs/RESULTS.md's tables from the committed summaries in docs/results
	$(GO) run ./monitor/results/internal/gen

results-check: ## fail when docs/RESULTS.md's tables differ from the committed summaries, or RESULTS.md or README.md states a pass@1 or difference that is no row of them
	$(GO) run ./monitor/results/internal/gen -check

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Each bench-NAME runs one component's benchmark through bench/record.sh:
# its output goes to docs/perf/NAME.txt and its table in
# docs/PERFORMANCE.md is made again from it.
BENCH  := storage sandbox docker grade tokenizer chat sgemm train engine proxy trainer update demos pipeline loop
RECORD := bench/record.sh
BENCH_GO = $(GO) test -run '^$$'

bench: ## run every component's benchmark (make bench-NAME for each NAME of BENCH), writing docs/perf and the tables of docs/PERFORMANCE.md
	@set -e; for b in $(BENCH); do $(MAKE) --no-print-directory bench-$$b; done

bench-storage: $(VERSITYGW_STAMP) ## Parquet write and read of segments (file store, S3) against arrow-go
	$(RECORD) storage $(BENCH_GO) -bench '^Benchmark(Write|Read)Segments$$/(file|s3|arrow-go-anchor)$$' -count 3 ./storage

bench-sandbox: /usr/bin/bwrap ## local sandbox create + exec + close against bubblewrap
	$(RECORD) sandbox $(BENCH_GO) -bench '^Benchmark(Local|LocalBackToBack|ExecOnly|AnchorBubblewrap|AnchorForkExec)$$' -benchtime 30x -count 3 ./sandbox/local

bench-docker: docker-up ## docker sandbox create + exec + close against the engine's own run of a container
	$(RECORD) docker $(BENCH_GO) -bench . -benchtime 20x ./sandbox/docker; rc=$$?; scripts/docker/stop-dockerd.sh; exit $$rc

bench-grade: pytest-ref ## grading a task against running its tests bare on the host, and the fast runner against pytest
	$(RECORD) grade $(BENCH_GO) -bench '^Benchmark(GradeOverhead|GradeFastRunner)$$' -benchtime 10x ./sandbox/grade

bench-tokenizer: $(TOKREF_STAMP) ## Qwen3 tokenizer encoding against @lenml/tokenizers (node)
	$(RECORD) tokenizer $(BENCH_GO) -bench '^BenchmarkEncode$$' -count 3 ./policy/tokenizer

bench-chat: jinja-ref ## chat template rendering against Jinja, tool-call parsing against encoding/json
	$(RECORD) chat $(BENCH_GO) -bench . -benchmem -count 5 ./policy/chat

bench-deps: ## Debian packages for the PyTorch/OpenBLAS anchors in bench/
	@scripts/setup deb-full python3-numpy python3-torch libopenblas0-pthread python3-threadpoolctl

bench-sgemm: bench-deps ## Sgemm against the FMA peak, gonum, OpenBLAS and PyTorch
	$(RECORD) sgemm sh -c "$(BENCH_GO) -bench 'FMAPeak|MicroKernel|Sgemm/.*/(legorl|gonum|kernel=avx2)/' -count 3 ./policy/kernels && \
		env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/sgemm_ref.py --count 3"

bench-train: bench-deps ## the tiny model's training step and logprob forward against PyTorch, alternating rounds
	$(RECORD) train /usr/bin/python3 bench/model_side_by_side.py --rounds 3 --threads 1,2

bench-engine: ## the inference engine's decode and prefill against the model's Cache.Extend, and prefix caching
	$(RECORD) engine $(BENCH_GO) -bench '^Benchmark(Decode|Prefill|SharedPrefix)$$' -benchtime 5x -count 3 ./policy/engine

bench-proxy: ## a 20-turn agent call through the proxy against a bare HTTP handler
	$(RECORD) proxy $(BENCH_GO) -bench '^Benchmark(Call|AppendHandler)$$' -benchtime 300x -count 3 -benchmem ./proxy

bench-trainer: ## the trainer's step and recompute against the model's, and SFT with and without the shared prefix
	$(RECORD) trainer $(BENCH_GO) -bench '^Benchmark(TrainStep|TrainStepMoE|Recompute|RecomputeMoE|Iteration|ModelTrainStep|ModelTrainStepMoE|ModelLogprobs|ModelLogprobsMoE|SFTStep)$$' -benchtime 2x ./trainer

bench-update: build ## an RL update of 256 tools rollouts with and without train.shared_prefix, alternating rounds
	$(RECORD) update bench/train.sh

bench-demos: ## the scripted demonstrations, one at a time and four at once
	$(RECORD) demos $(BENCH_GO) -bench '^BenchmarkSolveAll$$' -benchtime 1x -count 3 ./harness/scripted

bench-pipeline: ## rollouts through the Beam pipeline on Prism against calling the rollout runner directly
	$(RECORD) pipeline $(BENCH_GO) -bench . -benchtime 2x -count 2 ./pipelines/rollout

bench-loop: build ## rollouts/min of a fixed legorl run iteration (bash starter, 16 tasks x G=8); BASE=REF runs REF's build beside it
	$(RECORD) loop bench/loop.sh $(BASE)

docker-up: ## start the private Docker Engine (.cache/docker) and build the sandbox base image
	scripts/docker/start-dockerd.sh >/dev/null
	DOCKER_HOST=$(LEGORL_DOCKER_HOST) scripts/docker/base-image.sh

docker-down: ## stop the private Docker Engine
	scripts/docker/stop-dockerd.sh

clean: ## remove build outputs and the demo store (keeps .cache)
	rm -rf $(BIN) legorl-data

# The CUDA backend (policy/backend/cuda, build tag cuda), compiled without
# a GPU against the CUDA 12.x headers and libcuda stub of Debian's
# nvidia-cuda-dev (.cache/cuda-12, scripts/cuda/headers.sh); CUDA_ENV points
# cgo (gorgonia.org/cu looks in /usr/local/cuda) there. CUDA_PKGS lists the
# packages with cuda-tagged files.

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

device-check: device-bundle ## CUDA-vs-CPU equivalence, MoE replay and benchmarks on a GPU, recorded in docs/perf/cuda.txt and docs/PERFORMANCE.md (here if nvidia-smi works, else prints how to run it on a machine with a GPU)
	@if nvidia-smi >/dev/null 2>&1; then \
		OUT=$(DEVICE_DIR)/out scripts/cuda/device-check.sh run && scripts/cuda/device-check.sh record $(DEVICE_DIR)/out; \
	else \
		echo "no GPU here: on a machine with a GPU run 'bash scripts/cuda/device-check.sh run' from a copy of the repository with .cache/device, then 'scripts/cuda/device-check.sh record DIR' here with DIR the files it wrote"; \
	fi
