# Thin front for CMake. The README's two commands: `make run`, `make test`.
BUILD ?= build
CMAKE_FLAGS ?=

FUZZ_SECONDS ?= 600
STRESS_SECONDS ?= 1800
STRESS_MISUSE ?= 100

.PHONY: all run test bench install uninstall clean fuzz stress

all: $(BUILD)/build.ninja
	cmake --build $(BUILD)

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build-tsan/build.ninja:
	cmake -S . -B build-tsan -G Ninja -DSLUICE_SANITIZE=thread

build-release/build.ninja:
	cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release

build-ubsan/build.ninja:
	cmake -S . -B build-ubsan -G Ninja -DSLUICE_SANITIZE=undefined

build-debug/build.ninja:
	cmake -S . -B build-debug -G Ninja -DSLUICE_DEBUG=ON

build-fuzz/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DSLUICE_FUZZ=ON

# The main demonstration: the headline comparison against glibc, jemalloc,
# tcmalloc and mimalloc, in under a minute.
run: all
	python3 bench/run.py --quick

# Every test: the normal build (units, API, threads, fork, death, OOM, real
# programs, fault injection, the layering check), then the same tests in a
# debug build (invariants and the lock order checked; not the man pages,
# the install and the real programs, which it adds nothing to), then the
# sl_ API tests under UBSan and the multi-threaded ones under
# ThreadSanitizer, then the fuzzer's corpus and a short fuzzing run
# (clang), then the Rust crates' tests, without and with the check
# feature (when cargo is here; ctest's rust_package checks their packages),
# and last the library built as a Release build (-O3: warnings of its own,
# which -Werror turns into errors).
test: all build-debug/build.ninja build-tsan/build.ninja build-ubsan/build.ninja build-fuzz/build.ninja build-release/build.ninja
	cd $(BUILD) && ctest --output-on-failure
	cmake --build build-debug
	cd build-debug && ctest --output-on-failure -E '^(override|sluice_cmd|sluice_run|sluice_top|sluice_profile|valgrind|man_pages|install|rust_package|stats_json)$$'
	cmake --build build-ubsan
	cd build-ubsan && ctest --output-on-failure
	cmake --build build-tsan
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure
	cmake --build build-fuzz
	cd build-fuzz && ctest --output-on-failure
	@if command -v cargo >/dev/null 2>&1; then \
	  echo "cargo test (bindings/rust), then sluice-alloc's in checked mode (feature check)"; \
	  cd bindings/rust && CARGO_TARGET_DIR=$(CURDIR)/build/rust cargo test && \
	  CARGO_TARGET_DIR=$(CURDIR)/build/rust cargo test -p sluice-alloc --features check; \
	else echo "cargo not found: the Rust crates' tests (bindings/rust) are not run"; fi
	cmake --build build-release --target sluice sluice_static

# Fuzz for FUZZ_SECONDS (default 600); new inputs go to build-fuzz/new,
# crashes to build-fuzz/crash-*. Keep a finding: copy it into
# test/fuzz/corpus once it is fixed.
fuzz: build-fuzz/build.ninja
	cmake --build build-fuzz
	mkdir -p build-fuzz/new
	cd build-fuzz && ./test/fuzz/fuzz_alloc -max_total_time=$(FUZZ_SECONDS) -timeout=30 -rss_limit_mb=4096 \
	  new ../test/fuzz/corpus

# The model-based tester (test/model.c) for STRESS_SECONDS (default 1800)
# on each build: normal, UBSan, ThreadSanitizer and against the
# fault-injection library, one after another, each misuse injected
# STRESS_MISUSE times (default 100). Each prints its seed first;
# MODEL_SEED=N replays a failing one.
stress: all build-tsan/build.ninja build-ubsan/build.ninja
	cmake --build build-ubsan --target model
	cmake --build build-tsan --target model
	STRESS_SECONDS=$(STRESS_SECONDS) MODEL_MISUSE=$(STRESS_MISUSE) $(BUILD)/test/model
	STRESS_SECONDS=$(STRESS_SECONDS) MODEL_MISUSE=$(STRESS_MISUSE) SLUICE_FAULT=mmap,madvise:p=0.3 $(BUILD)/test/model_fault
	STRESS_SECONDS=$(STRESS_SECONDS) MODEL_MISUSE=$(STRESS_MISUSE) build-ubsan/test/model
	STRESS_SECONDS=$(STRESS_SECONDS) MODEL_MISUSE=$(STRESS_MISUSE) TSAN_OPTIONS="halt_on_error=1 die_after_fork=0" build-tsan/test/model

bench: all
	python3 bench/run.py

# make install [PREFIX=/usr/local] [LIBDIR=$(PREFIX)/lib] [DESTDIR=]:
# LIBDIR/libsluice.so.0.x.y with its links libsluice.so.0 and libsluice.so,
# LIBDIR/libsluice.a, LIBDIR/pkgconfig/sluice.pc, LIBDIR/cmake/sluice,
# include/sluice.h, bin/sluice (and libexec/sluice/sluice_plot.py, what draws
# its --plot), share/man/man1, man3 and man7; all below DESTDIR
# when given (a package's staging folder; the files name PREFIX). The
# build is configured for PREFIX and LIBDIR first (the sluice command and
# sluice.pc name them), a LIBDIR under PREFIX kept relative, so that the
# CMake package stays relocatable. make uninstall removes what the last
# install wrote (its list: $(BUILD)/install_manifest.txt), below the same
# DESTDIR, which must be given again.
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
DESTDIR ?=
install: $(BUILD)/build.ninja
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) \
	  -DCMAKE_INSTALL_LIBDIR=$(patsubst $(patsubst %/,%,$(PREFIX))/%,%,$(LIBDIR)) >/dev/null
	cmake --build $(BUILD)
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)

uninstall:
	DESTDIR=$(DESTDIR) cmake -DMANIFEST=$(abspath $(BUILD))/install_manifest.txt -P cmake/uninstall.cmake

clean:
	rm -rf $(BUILD) build-debug build-tsan build-ubsan build-fuzz
