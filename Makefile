# cuecast: the two quick-start commands are `make demo` and `make test`.
GO ?= go
# Every go command here builds with -trimpath, through GOFLAGS so that none
# is left out (staticcheck's go list included): it keeps the checkout's
# directory out of what is compiled, and so out of the build cache's keys,
# and a clean clone in a new directory (as CI makes) reuses the packages an
# earlier checkout of the same sources compiled. Without it every package of
# ours was compiled again: go vet ./... in a second clone 47 s, 1.6 s with
# it; staticcheck 75 s, 1.2 s. A failing test's stack names files by their
# module path (github.com/cuecast/cuecast/tailer/tailer.go).
export GOFLAGS += -trimpath
BENCHTIME ?= 1x

.PHONY: all build demo test vet fmt bench soak scale clean e2e release dockerfile-lint prometheus

all: build

build:
	$(GO) build -o bin/cuecast ./cmd/cuecast

# The whole pipeline end to end on configs-example/ with the embedded NATS server.
# It builds bin/cuecast first and says so: on a fresh machine the build is minutes of
# "go: downloading" lines, which otherwise look like a hang.
demo:
	@echo "make demo: building bin/cuecast (a fresh machine downloads and compiles the Go modules first: a few minutes on 2 cores; later runs take seconds)"
	$(GO) build -o bin/cuecast ./cmd/cuecast
	bin/cuecast demo --example configs-example

# staticcheck is installed into bin/ at the version named here, as bin/cue is.
STATICCHECK_VERSION ?= v0.8.2
vet:
	$(GO) vet ./...
	GOBIN=$(CURDIR)/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(CURDIR)/bin/staticcheck ./...
	cd deploy/kubernetes && $(CURDIR)/bin/staticcheck ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

# Every test with the race detector. go test already links the binaries it
# runs itself without DWARF or a symbol table (-s -w; only -c, -o and the
# profiling flags keep them), so a linker flag here saves nothing.
#
# Two packages of pure arithmetic are compiled without the detector's
# instrumentation: bcrypt's cipher (golang.org/x/crypto/blowfish: a
# cipher made for each call, over a copy of the password bcrypt itself
# makes) and ed25519's field arithmetic (crypto/internal/fips140/
# edwards25519: values each call makes). Neither holds anything two
# goroutines share, so there is no race in them for the detector to
# find, and every other package, ours, nats-server's and the standard
# library's, is still instrumented. Instrumented, they were 56 of the
# ~725 CPU-s of go test -race ./...: a bcrypt login at the cost the tests'
# servers use took 16 ms against 1.1 ms (the tests log in ~1,900 times and
# hash ~1,200 passwords), an ed25519 verification 490 us against 52 us.
RACE_PURE ?= golang.org/x/crypto/blowfish crypto/internal/fips140/edwards25519/...
# nats-server is not among them, though the tests spend more of their own
# CPU in it than in any other dependency: compiled without instrumentation it
# holds copies of generic code the rest of the binary shares (sync.Map's
# hash trie, atomic.Pointer), the linker keeps one copy of each, and the
# standard library lost happens-before edges: the detector reported races in
# encoding/json's type cache that are not there (12-07, E).
#
# With -trimpath (GOFLAGS, above) a test binary is the same in every
# checkout, and so is the key of its cached result: -count=1 makes make test
# run every test rather than report one another checkout ran.
#
# -parallel 4: four of a package's parallel tests at a time, not GOMAXPROCS
# (2). Most of them spend their time waiting on their own servers, timers and
# heartbeats, so with two at a time a package left a core idle that the other
# package running beside it did not always fill: make test 6 min 33 s and
# 691 CPU-s ▶ 5 min 58 s and 655, back to back on a quiet 2-core box
# (internal/cli 179 ▶ 156 s, distributor 56 ▶ 38 s).
# Tried on E and not taken (the tests' run alone, quiet, -json): -p 3 was
# 390 s and 757 CPU-s against 364 s and 644 (the packages slow each other
# down), -parallel 3 363 s and 646, GOMAXPROCS=1 405 s, GOGC=400 within
# the run-to-run spread; the run keeps 1.8 of the 2 cores busy throughout.
#
# -vet=off: go test would vet each package again with a subset of the
# analyzers that make vet's go vet ./... has just run on every package (and
# the kubernetes module's vet runs beside it, below). After a change to
# distributor that subset was 6 s and 11 CPU-s of make test, for the
# packages compiled again (12-07, E); with nothing changed it is cached.
TESTFLAGS ?= -race -count=1 -parallel 4 -vet=off $(foreach p,$(RACE_PURE),-gcflags=$(p)=-race=false)

# A race-enabled binary sleeps a second before it exits unless GORACE says
# otherwise: once per test package, and once per command the tests re-execute
# (testscript, crash and kill children). Races are reported as they happen.
#
# clear_shadow_mmap_threshold: the race runtime clears the shadow of a new
# allocation over 64 KiB by mapping fresh pages over it, which the next
# access faults back in, page by page, each with a TLB shootdown to the
# other cores. A new zlib writer (1 MiB of deflate state: go-git makes one
# whenever its pool is empty, which under -race is often, since sync.Pool
# then drops a quarter of what it is given) cost 15 ms that way and 0.9 ms
# when the runtime writes the zeros itself; 90 of the ~830 CPU-s of
# go test -race ./... went on go-git's commits in the tests. It changes how
# the shadow is cleared, not what the detector sees.
GORACE ?= atexit_sleep_ms=0 clear_shadow_mmap_threshold=67108864

# deploy/kubernetes is its own module (the Kubernetes API types stay out of the
# main go.sum); its test decodes the manifests with those types and runs their
# command lines through cuecast's own flag parsing. Its vet and test (8 s on
# 2 cores, most of it linking the Kubernetes types) run beside the main
# module's tests, their output after them; make test fails if either fails.
# The compiler's differential test runs the official cue CLI beside cuecast on
# generated repos; make test installs it (the version go.mod names) into bin/.
CUE_VERSION ?= $(shell $(GO) list -m -f '{{.Version}}' cuelang.org/go)
#
# go test runs two packages at a time (-p is the number of cores) and
# starts them in the order it is given them: the slowest go first, so the
# run does not end with one long package alone on a core while the other
# idles. ./... adds the rest; a package named twice runs once. A package
# in TEST_FIRST that moves or is renamed fails make test by name: update
# the list (the slowest are the longest "ok" lines of a run).
TEST_FIRST ?= ./internal/cli ./internal/pipeline ./internal/web ./distributor/rollout ./internal/natsconf ./compiler ./ci ./internal/scalesim ./distributor ./mutator ./client/integration ./tailer
test: vet dockerfile-lint prometheus
	GOBIN=$(CURDIR)/bin $(GO) install cuelang.org/go/cmd/cue@$(CUE_VERSION)
	kube=$$(mktemp); trap 'rm -f "$$kube"' EXIT; trap 'exit 130' INT; trap 'exit 143' TERM; \
	(cd deploy/kubernetes && $(GO) vet ./... && GORACE="$(GORACE)" $(GO) test $(TESTFLAGS) -timeout 5m ./...) >$$kube 2>&1 & kubepid=$$!; \
	CUECAST_CUE=$(CURDIR)/bin/cue GORACE="$(GORACE)" $(GO) test $(TESTFLAGS) -timeout 9m $(TEST_FIRST) ./...; rc=$$?; \
	wait $$kubepid; kuberc=$$?; \
	echo "deploy/kubernetes (its own module, vetted and tested beside the tests above):"; cat $$kube; \
	[ $$rc -eq 0 ] && [ $$kuberc -eq 0 ]

# A real Prometheus for the rollout analysis tests (distributor/rollout,
# internal/promtest): when /usr/bin/prometheus is missing, Debian's prometheus
# package is downloaded with apt-get and unpacked into bin/prometheus-deb with
# dpkg -x, so no system service is installed or started (the tests run their
# own, on a free port, with a temporary store). Where neither works the tests
# skip, saying why; CUECAST_PROMETHEUS names another binary.
PROMETHEUS_DEB = $(CURDIR)/bin/prometheus-deb
prometheus:
	@if [ ! -x /usr/bin/prometheus ] && [ -z "$$CUECAST_PROMETHEUS" ] && [ ! -x $(PROMETHEUS_DEB)/usr/bin/prometheus ]; then \
		if command -v apt-get >/dev/null && command -v dpkg >/dev/null; then \
			mkdir -p $(PROMETHEUS_DEB) && cd $(PROMETHEUS_DEB) && \
			{ apt-get download prometheus 2>/dev/null || \
				{ [ "$$(id -u)" = 0 ] && apt-get update >/dev/null && apt-get download prometheus; }; } && \
			dpkg -x prometheus_*.deb . && rm -f prometheus_*.deb \
			|| echo "prometheus: could not fetch Debian's prometheus package; the analysis tests will skip"; \
		else \
			echo "prometheus: /usr/bin/prometheus is missing and apt-get is not usable here; the analysis tests will skip"; \
		fi; \
	fi

# The dashboard in headless Chromium (internal/web/e2e, build tag e2e): installs
# Debian's chromium with apt-get when /usr/bin/chromium is missing; the test skips,
# saying why, only when no Chromium can be found or installed. Screenshots of each
# page (overview, overview filtered, config, a version's diff, a halted rollout)
# go to $(E2E_ARTIFACTS).
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
	# OFREP through the web SDK's provider in Chromium (docs/FLAGS.md, "Other languages").
	$(GO) vet -tags e2e ./flags/openfeature/integration/
	$(GO) test -tags e2e -count=1 -timeout 5m -run TestOFREPBrowser -v ./flags/openfeature/integration/

# The Dockerfile, linted with dockerfilelint from the npm registry (no image can be
# built here; see CONTRIBUTING.md). It needs Node's npx, which CI has; README's
# quick start promises nothing but Go, so without npx this says so and goes on.
dockerfile-lint:
	@if command -v npx >/dev/null; then npx --yes dockerfilelint@1.8.0 Dockerfile; \
	else echo "dockerfile-lint: npx (Node.js) not found; the Dockerfile is not linted on this machine"; fi

# Benchmarks; results are recorded by hand in BENCHMARKS.md with the machine and method.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 60m ./...

# Long fault runs: the full kill test, the reconnect storm of 5,000 instances on
# a summarised tree, and the large-fleet runs (among them the scale run,
# internal/scalesim, at its default sizes and the intervals below; make scale
# runs it alone).
soak:
	CUECAST_SOAK=1 CUECAST_SCALE_HEARTBEAT=$(SCALE_HEARTBEAT) CUECAST_SCALE_RECONCILE=$(SCALE_RECONCILE) \
		CUECAST_SCALE_PING=$(SCALE_PING) $(GO) test -run 'Soak|Kill|Crash|Storm' -timeout 120m -v ./...

# The scale run alone (internal/scalesim, BENCHMARKS.md "Scale"): a hub and
# SCALE_NODES node servers, each in its own process, and SCALE_SIZES instances in
# total in child processes, SCALE_CHANGES changes measured at each size. The
# instances report every SCALE_HEARTBEAT, re-read every SCALE_RECONCILE and ping
# every SCALE_PING: 60s, 5m and 60s by default, because on a 2-vCPU machine the
# fleet at rest fills it past ~20,000 instances at the client's own defaults (15s,
# 60s, 15s), which SCALE_HEARTBEAT= SCALE_RECONCILE= SCALE_PING= (empty) give
# (docs/SCALING.md, "Capacity model"; BENCHMARKS.md "Scale").
SCALE_SIZES ?= 10000,25000,50000
SCALE_NODES ?= 5
SCALE_CHANGES ?= 5
SCALE_HEARTBEAT ?= 60s
SCALE_RECONCILE ?= 5m
SCALE_PING ?= 60s
scale:
	CUECAST_SOAK=1 CUECAST_SCALE_SIZES=$(SCALE_SIZES) CUECAST_SCALE_NODES=$(SCALE_NODES) \
		CUECAST_SCALE_CHANGES=$(SCALE_CHANGES) CUECAST_SCALE_HEARTBEAT=$(SCALE_HEARTBEAT) \
		CUECAST_SCALE_RECONCILE=$(SCALE_RECONCILE) CUECAST_SCALE_PING=$(SCALE_PING) \
		$(GO) test -count=1 -run TestScaleSoak -timeout 90m -v ./internal/scalesim/

fmt:
	gofmt -w $$(git ls-files '*.go')

# Release artifacts under $(DIST): static binaries for linux and darwin on amd64 and
# arm64, a CycloneDX SBOM per binary and SHA256SUMS. Reproducible: no cgo, -trimpath,
# no build IDs, and the version, commit and date come from Git (the date is the
# commit's, not the clock's), so two builds of one commit are byte for byte equal.
# Nothing is published; see CONTRIBUTING.md for cutting a tag.
DIST ?= $(CURDIR)/dist
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE ?= $(shell git log -1 --format=%cI 2>/dev/null)
BUILDINFO = github.com/cuecast/cuecast/internal/buildinfo
LDFLAGS = -s -w -buildid= -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT) -X $(BUILDINFO).date=$(DATE)
release:
	rm -rf $(DIST) && mkdir -p $(DIST)
	$(GO) build -o $(DIST)/.sbom ./internal/sbom/gen
	@for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out=$(DIST)/cuecast_$(VERSION)_$${os}_$${arch}; \
		echo "build $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=false \
			-ldflags '$(LDFLAGS)' -o $$out ./cmd/cuecast || exit 1; \
		$(DIST)/.sbom -version $(VERSION) $$out || exit 1; \
	done
	rm $(DIST)/.sbom
	cd $(DIST) && sha256sum cuecast_* > SHA256SUMS
	@cat $(DIST)/SHA256SUMS

clean:
	rm -rf bin dist
