# Entry points: `make demo` and `make test` do all set-up on a fresh Debian 12 machine.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)

.PHONY: all deps configure build demo test fuzz fuzz-run clean

all: build

# `make test` also installs clang and its libFuzzer runtime: the fuzz_* tests build and run the
# libFuzzer targets (tests/fuzz/README.md).
DEPS_SET ?=
test: DEPS_SET = fuzz
deps:
	bash scripts/install-deps.sh $(DEPS_SET)

CONFIGURE = cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)
configure: deps
	$(CONFIGURE)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# `make demo`: the set-up steps print one line each (their output goes to $(BUILD_DIR)/logs/), and
# only the three tools the demo runs are built; the tests are built by `make test`.
DEMO_TARGETS = kiln_cli atc_cli converter_lite_cli
DEMO_LOGS = $(BUILD_DIR)/logs
demo:
	@bash scripts/quietly.sh "deps (Debian packages)" $(DEMO_LOGS)/deps.log bash scripts/install-deps.sh
	@bash scripts/quietly.sh "configure ($(BUILD_TYPE))" $(DEMO_LOGS)/configure.log $(CONFIGURE)
	@bash scripts/quietly.sh "build kiln, atc, converter_lite" $(DEMO_LOGS)/build.log \
	  cmake --build $(BUILD_DIR) -j $(JOBS) --target $(DEMO_TARGETS)
	@BUILD_DIR=$(BUILD_DIR) bash scripts/demo.sh

# After the run: ctest's wall time and the slowest tests of this run; every test's time stays in
# $(BUILD_DIR)/ctest-junit.xml (and, averaged over runs, Testing/Temporary/CTestCostData.txt, which
# ctest -j reads to start the long tests first). tests/README.md: what runs where and how long.
test: build
	@start=$$(date +%s); rc=0; \
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) \
	  --output-junit $(abspath $(BUILD_DIR))/ctest-junit.xml || rc=$$?; \
	echo "make test: ctest took $$(( $$(date +%s) - start )) s of wall time with -j $(JOBS); slowest:"; \
	sed -n 's/.*<testcase name="\([^"]*\)".* time="\([^"]*\)".*/\2 \1/p' \
	  $(BUILD_DIR)/ctest-junit.xml | sort -g -r | head -n 12 | awk '{printf "  %7.1f s  %s\n", $$1, $$2}'; \
	echo "make test: every test's time: $(BUILD_DIR)/ctest-junit.xml"; \
	exit $$rc

# The ASan+UBSan libFuzzer build (clang, build-fuzz/): every harness and the unit tests; `make
# fuzz-run` runs each target FUZZ_SECONDS under the sanitizers, then the unit tests. See
# tests/fuzz/README.md.
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_FLAGS = -O1 -gline-tables-only -DNDEBUG
fuzz:
	bash scripts/install-deps.sh fuzz # the build deps plus clang's fuzzer/sanitizer runtimes
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$(FUZZ_FLAGS)" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$(FUZZ_FLAGS)" \
	  -DKILN_FUZZ=ON -DKILN_BUILD_TESTS=ON
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzzers kiln_unit_tests

fuzz-run: fuzz
	KILN_FUZZ_RUNS=-1 KILN_FUZZ_SEED=0 bash tests/fuzz/run_all.sh $(FUZZ_DIR)/tests/fuzz $(FUZZ_SECONDS) 2 $(FUZZ_DIR)/fuzz-work
	$(FUZZ_DIR)/tests/unit/kiln_unit_tests --gtest_brief=1

clean:
	rm -rf $(BUILD_DIR) $(FUZZ_DIR)
