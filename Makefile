# cuecast: the two quick-start commands are `make demo` and `make test`.
GO ?= go
BENCHTIME ?= 1x

.PHONY: all build demo test vet fmt bench soak clean e2e

all: build

build:
	$(GO) build -o bin/cuecast ./cmd/cuecast

# The whole pipeline end to end on configs-example/ with the embedded NATS server.
demo:
	$(GO) run ./cmd/cuecast demo --example configs-example

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

test: vet
	$(GO) test -race -timeout 9m ./...

# The dashboard in headless Chromium (internal/web/e2e, build tag e2e): installs
# Debian's chromium with apt-get when /usr/bin/chromium is missing; the test skips,
# saying why, only when no Chromium can be found or installed. Screenshots go to
# $(E2E_ARTIFACTS).
E2E_ARTIFACTS ?= $(CURDIR)/bin/e2e
e2e:
	@if [ ! -x /usr/bin/chromium ] && [ -z "$$CUECAST_CHROMIUM" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium \
				|| echo "e2e: apt-get could not install chromium"; \
		elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then \
			sudo -n apt-get update && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium \
				|| echo "e2e: sudo apt-get could not install chromium"; \
		else \
			echo "e2e: /usr/bin/chromium is missing and apt-get is not usable here"; \
		fi; \
	fi
	$(GO) vet -tags e2e ./internal/web/e2e/
	@mkdir -p $(E2E_ARTIFACTS)
	CUECAST_ARTIFACTS=$(E2E_ARTIFACTS) $(GO) test -tags e2e -count=1 -timeout 10m -v ./internal/web/e2e/

# Benchmarks; results are recorded by hand in BENCHMARKS.md with the machine and method.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 60m ./...

# Long fault runs: the full kill test and the large-fleet runs.
soak:
	CUECAST_SOAK=1 $(GO) test -run 'Soak|Kill|Crash' -timeout 120m -v ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
