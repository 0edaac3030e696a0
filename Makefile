# kiln: user-facing targets. Each installs the Debian packages it needs first
# (as root, non-interactive) when they are missing, then drives CMake.
#   make demo      train an MLP and a CNN on scikit-learn's digits, eager and
#                  compiled; write the trace, its HTML report and a profile
#   make examples  build every program of examples/
#   make install   build and install kiln under PREFIX (default /usr/local)
#   make test      build and run the whole suite, then again under ASan+UBSan,
#                  then the threaded tests under ThreadSanitizer
#   make bench     build and run the benchmarks, then list the goals missed
#   make demo-ddp  train the digits MLP data-parallel on 2 ranks (mpirun -np 2)
SHELL := /bin/bash
JOBS ?= $(shell nproc)
BUILD_DIR ?= build
PREFIX ?= /usr/local
ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan

BUILD_PKGS := cmake gcc make pkg-config libopenblas-dev libdnnl-dev libsleef-dev libjansson-dev \
  libmd-dev libdw1
# Open MPI: the distributed layer (src/distributed/) and its tests; kiln
# builds without it (the layer then reports "built without MPI").
MPI_PKGS := libopenmpi-dev openmpi-bin
TEST_PKGS := $(BUILD_PKGS) $(MPI_PKGS) libcriterion-dev chromium clang libclang-rt-14-dev libtsan2 \
  qemu-user

.PHONY: demo digits examples install configure-release test bench deps-build deps-test configure \
  build test-plain test-asan test-tsan deps-mpi demo-ddp

deps-build:
	@./scripts/install-deps.sh $(BUILD_PKGS)

deps-test:
	@./scripts/install-deps.sh $(TEST_PKGS)

deps-mpi:
	@./scripts/install-deps.sh $(BUILD_PKGS) $(MPI_PKGS)

# cmake --build as a top-level make (no "Entering directory" noise between
# the progress lines).
CMAKE_BUILD := env -u MAKELEVEL -u MAKEFLAGS cmake --build

# The release build tree shared by demo, examples and install.
configure-release:
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DKN_BUILD_TESTS=OFF \
	  -DKN_BUILD_EXAMPLES=ON -DKN_BUILD_TOOLS=ON > /dev/null

# The main demo: an MLP and a small CNN trained on scikit-learn's digits
# (data from Debian's python3-sklearn), eager and compiled, with a structured
# trace, its HTML report and an op-level profile.
demo: deps-build configure-release
	@./scripts/fetch-digits.sh $(BUILD_DIR)/digits.csv
	@echo "== building kiln, the demo and the kiln command in $(BUILD_DIR)/ (about a minute on 2 cores)"
	@$(CMAKE_BUILD) $(BUILD_DIR) -j $(JOBS) --target example_digits kiln_tool
	@rm -rf $(BUILD_DIR)/demo_trace
	@echo "== running the demo"
	KILN_PROFILE=$(BUILD_DIR)/demo_profile.json $(BUILD_DIR)/examples/digits $(BUILD_DIR)/digits.csv $(BUILD_DIR)/demo_trace \
	  $(BUILD_DIR)/digits_cnn.safetensors
	@echo "== writing the HTML report"
	$(BUILD_DIR)/tools/kiln report --overwrite -o $(BUILD_DIR)/demo_trace_report $(BUILD_DIR)/demo_trace
	@echo "open $(BUILD_DIR)/demo_trace_report/index.html in a browser to read the report;"
	@echo "$(BUILD_DIR)/demo_profile.json opens in Perfetto (ui.perfetto.dev) or chrome://tracing"

# Data-parallel training on 2 ranks (docs/DISTRIBUTED.md): the digits MLP
# with DistributedDataParallel, checked against one process over the whole
# batch; rank 0 writes the checkpoint and every rank reloads it. As root,
# Open MPI needs its allow-run-as-root settings; --oversubscribe lets the 2
# ranks share fewer cores; the shared-memory transport needs no network.
MPIRUN_ENV := OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 \
  OPENBLAS_NUM_THREADS=1
demo-ddp: deps-mpi configure-release
	@./scripts/fetch-digits.sh $(BUILD_DIR)/digits.csv
	@$(CMAKE_BUILD) $(BUILD_DIR) -j $(JOBS) --target example_ddp_digits
	$(MPIRUN_ENV) mpirun -np 2 --oversubscribe --mca btl self,vader \
	  $(BUILD_DIR)/examples/ddp_digits $(BUILD_DIR)/digits.csv $(BUILD_DIR)/ddp_digits.safetensors

# The same demo under its own name.
digits: demo

examples: deps-build configure-release
	@$(CMAKE_BUILD) $(BUILD_DIR) -j $(JOBS) --target examples
	@echo "examples built in $(BUILD_DIR)/examples/:" $$(cd examples && ls *.c | sed 's/\.c$$//')

# Installs the library (shared and static), the headers, the kiln command,
# kiln.pc and the CMake package under PREFIX; refreshes the loader cache
# when PREFIX is a system prefix and we may.
install: deps-build configure-release
	@$(CMAKE_BUILD) $(BUILD_DIR) -j $(JOBS) --target kiln kiln_static kiln_tool
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)
	@case "$(PREFIX)" in /usr|/usr/local) \
	  if [ "$$(id -u)" = 0 ]; then ldconfig; fi;; esac
	@echo "installed: $(PREFIX)/bin/kiln, $(PREFIX)/include/kiln/, libkiln.so and libkiln.a in $(PREFIX)/$$(grep -m1 '^CMAKE_INSTALL_LIBDIR' $(BUILD_DIR)/CMakeCache.txt | cut -d= -f2)/"

test: deps-test
	$(MAKE) --no-print-directory test-plain test-asan test-tsan

test-plain:
	cmake -S . -B $(BUILD_DIR)-test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKN_WERROR=ON > /dev/null
	cmake --build $(BUILD_DIR)-test -j $(JOBS)
	cd $(BUILD_DIR)-test && ctest --output-on-failure -j $(JOBS)

test-asan:
	cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DKN_WERROR=ON -DKN_SANITIZE=ON \
	  -DKN_BUILD_BENCH=OFF > /dev/null
	cmake --build $(ASAN_DIR) -j $(JOBS)
	cd $(ASAN_DIR) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS)

# ThreadSanitizer: builds the library and only the threaded tests
# (KN_THREADED_TESTS in tests/CMakeLists.txt). They run with one OpenMP thread
# per team: libgomp is not instrumented, and TSan would report its team's
# shared work as races (false positives).
test-tsan:
	cmake -S . -B $(TSAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKN_WERROR=ON -DKN_TSAN=ON \
	  -DKN_BUILD_BENCH=OFF -DKN_BUILD_TOOLS=OFF -DKN_BUILD_EXAMPLES=OFF > /dev/null
	cmake --build $(TSAN_DIR) -j $(JOBS)
	cd $(TSAN_DIR) && ctest --output-on-failure -j $(JOBS)

# Runs every bench program (a crash stops it), keeps their output in
# $(BUILD_DIR)/bench.log (first line: when, on which CPU; each program's
# header: the load average before it) and ends with the goals missed
# (scripts/bench-summary.sh against bench/goals.txt: information, not a
# failure). scripts/bench-doc.sh turns the log into docs/BENCH.md.
bench: deps-mpi
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release > /dev/null
	cmake --build $(BUILD_DIR) -j $(JOBS)
	@set -o pipefail; { echo "# make bench $$(date -u '+%Y-%m-%d %H:%M UTC'), $$(sed -n \
	  's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $$(nproc) CPUs, $$(for f in avx512f avx2; \
	  do grep -q -w $$f /proc/cpuinfo && { echo $$f; break; }; done)$$(for f in avx512_bf16 \
	  amx_bf16; do grep -q -w $$f /proc/cpuinfo && printf ' %s' $$f; done), $(BUILD_DIR) (Release)"; \
	  for b in $(BUILD_DIR)/bench/bench_*; do [ -x "$$b" ] || continue; \
	  echo "== $$(basename $$b) load $$(cut -d' ' -f1 /proc/loadavg)"; "$$b" || exit 1; done; } \
	  | tee $(BUILD_DIR)/bench.log
	@echo "== goals (from $(BUILD_DIR)/bench.log)"
	@./scripts/bench-summary.sh $(BUILD_DIR)/bench.log
