# kiln: user-facing targets. Each installs the Debian packages it needs first
# (as root, non-interactive) when they are missing, then drives CMake.
#   make demo    build and run the main demo
#   make test    build and run the whole suite, then again under ASan+UBSan
#   make bench   build and run the benchmarks
SHELL := /bin/bash
JOBS ?= $(shell nproc)
BUILD_DIR ?= build
ASAN_DIR ?= build-asan

# libgomp's idle threads spin after each parallel region and then compete
# with OpenBLAS's own threads; passive waiting removes that contention
# (measured ~3x on an alternating kernel/GEMM loop). Users may override it.
OMP_WAIT_POLICY ?= passive
export OMP_WAIT_POLICY

BUILD_PKGS := cmake gcc make pkg-config libopenblas-dev libsleef-dev libjansson-dev libmd-dev libdw1
TEST_PKGS := $(BUILD_PKGS) libcriterion-dev chromium clang libclang-rt-14-dev

.PHONY: demo test bench deps-build deps-test configure build test-plain test-asan

deps-build:
	@./scripts/install-deps.sh $(BUILD_PKGS)

deps-test:
	@./scripts/install-deps.sh $(TEST_PKGS)

demo: deps-build
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DKN_BUILD_TESTS=OFF > /dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target example_mlp_train kiln_tool > /dev/null
	@rm -rf $(BUILD_DIR)/demo_trace
	$(BUILD_DIR)/examples/mlp_train $(BUILD_DIR)/demo_trace
	$(BUILD_DIR)/tools/kiln report --overwrite --no-browser -o $(BUILD_DIR)/demo_report $(BUILD_DIR)/demo_trace
	@echo "open $(BUILD_DIR)/demo_report/index.html in a browser to read the report"

test: deps-test
	$(MAKE) --no-print-directory test-plain test-asan

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

bench: deps-build
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release > /dev/null
	cmake --build $(BUILD_DIR) -j $(JOBS)
	@for b in $(BUILD_DIR)/bench/bench_*; do \
	  [ -x "$$b" ] || continue; echo "== $$(basename $$b)"; "$$b" || exit 1; done
