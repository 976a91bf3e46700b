# Thin front for CMake. The README's two commands: `make run`, `make test`.
BUILD ?= build
CMAKE_FLAGS ?=

.PHONY: all run test bench install clean

all: $(BUILD)/build.ninja
	cmake --build $(BUILD)

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build-tsan/build.ninja:
	cmake -S . -B build-tsan -G Ninja -DSLUICE_SANITIZE=thread

build-ubsan/build.ninja:
	cmake -S . -B build-ubsan -G Ninja -DSLUICE_SANITIZE=undefined

# The main demonstration: the headline comparison against glibc, jemalloc,
# tcmalloc and mimalloc, in under a minute.
run: all
	python3 bench/run.py --quick

# Every test: the normal build (units, API, threads, fork, death, OOM, real
# programs), then the sl_ API tests under UBSan and the multi-threaded ones
# under ThreadSanitizer.
test: all build-tsan/build.ninja build-ubsan/build.ninja
	cd $(BUILD) && ctest --output-on-failure
	cmake --build build-ubsan
	cd build-ubsan && ctest --output-on-failure
	cmake --build build-tsan
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure

bench: all
	python3 bench/run.py

# PREFIX=/usr/local by default: lib/libsluice.{so,a}, include/sluice.h, lib/pkgconfig/sluice.pc
install: all
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

clean:
	rm -rf $(BUILD) build-tsan build-ubsan
