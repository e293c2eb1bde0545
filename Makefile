# cuecast: the two quick-start commands are `make demo` and `make test`.
GO ?= go
BENCHTIME ?= 1x

.PHONY: all build demo test vet fmt bench soak clean

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
