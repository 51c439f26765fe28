# Makefile — the two commands of the quick start, and a few helpers.
#   make demo     install what is missing, build, run the demo inspected live
#   make test     install what is missing, build (gcc, clang, sanitizers),
#                 run every test and fuzz every decoder for a bounded time
#   make build    release build in build/release
#   make install  install to PREFIX (default /usr/local)
#   make bench    print every benchmark table
PREFIX ?= /usr/local
JOBS ?= 2
BUILD := build/release

.PHONY: all deps build demo test install bench clean

all: build

deps:
	@scripts/deps.sh build

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSPY_BUILD_TESTS=OFF >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

demo: build
	@echo "spyglass: the dashboard is at http://127.0.0.1:7420/ while the demo runs"
	@$(BUILD)/spyglass demo --serve

test:
	@scripts/deps.sh test
	@scripts/test.sh

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

bench: build
	@$(BUILD)/spyglass bench wire
	@$(BUILD)/spyglass bench clock
	@$(BUILD)/spyglass bench msgprof
	@$(BUILD)/spyglass bench trace

clean:
	rm -rf build
