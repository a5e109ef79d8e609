# ntbx — the two commands a person needs are `make demo` and `make test`.
# CMake does the building (build/ and, for the sanitizer run, build-san/);
# this file names the jobs.

BUILD     ?= build
BUILD_SAN ?= build-san
PREFIX    ?= /usr/local
JOBS      ?= $(shell nproc)
CMAKE_GEN := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all deps test test-fast test-san demo install bench fuzz clean

all: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD)/CMakeCache.txt:
	@command -v cmake >/dev/null || scripts/deps.sh
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null

# Installs what the tests need (Debian packages), builds, and runs every
# test twice: a normal build, then AddressSanitizer + UBSan.
test: deps
	$(MAKE) all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-san

test-san:
	cmake -S . -B $(BUILD_SAN) $(CMAKE_GEN) -DNTBX_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  NTBX_SANITIZED=1 ctest --output-on-failure -j $(JOBS)

deps:
	scripts/deps.sh

demo: deps
	$(MAKE) all
	scripts/demo.sh

# Reconfigure with PREFIX: ntbx.pc records where things are installed.
install: all
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	cmake --install $(BUILD)

bench: all
	bench/run.sh

fuzz:
	$(MAKE) all
	scripts/fuzz.sh

clean:
	rm -rf $(BUILD) $(BUILD_SAN) build-fuzz
