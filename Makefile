# Entry points: `make demo` and `make test` do all set-up on a fresh Debian 12 machine.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)

.PHONY: all deps configure build demo test fuzz clean

all: build

deps:
	bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	BUILD_DIR=$(BUILD_DIR) bash scripts/demo.sh

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# libFuzzer harness for the ONNX importer (clang); how to seed and run it: tests/fuzz/README.md
fuzz:
	bash scripts/install-deps.sh fuzz # the build deps plus clang's fuzzer/sanitizer runtimes
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON -DKILN_BUILD_TESTS=OFF
	cmake --build build-fuzz -j $(JOBS) --target onnx_import_fuzz

clean:
	rm -rf $(BUILD_DIR) build-fuzz
