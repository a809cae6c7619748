# aimi swarm: build, test, demo. `make help` lists the targets.
GO      ?= go
BIN     ?= bin
PKGS    := ./...
export CGO_ENABLED ?= 0

.PHONY: help build test test-short test-long lint fuzz bench clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build aimi, aimid and acp-runner into bin/ (static)
	$(GO) build -trimpath -o $(BIN)/ ./cmd/...

lint: ## go vet and gofmt
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test: lint ## every test, against the real Docker engine (builds the images it needs)
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 40m $(PKGS)

# The engine is pointed at a socket that does not exist (inside the
# repository): a test that reaches for it without asking dockertest fails
# here rather than quietly using the engine.
test-short: ## the unit tests: every test that needs no engine (AIMI_SKIP_DOCKER=1, -short), none asks one; about 3 min on 2 cores
	CGO_ENABLED=1 AIMI_SKIP_DOCKER=1 DOCKER_HOST=unix://$(CURDIR)/.no-engine.sock $(GO) test -race -short -count=1 -timeout 20m $(PKGS)

test-long: ## the long proofs make test leaves out (a 128 MiB journal read in bounded memory, 20 rounds of a 150,000-line burst; minutes on 2 cores)
	CGO_ENABLED=1 AIMI_LONG_TESTS=1 $(GO) test -race -count=1 -timeout 90m -run 'TestJournalAtItsCapIsReadInBoundedMemory|TestAgentStderrBurstTwentyRounds' ./cmd/aimid

FUZZTIME ?= 10s
fuzz: ## short run of every fuzz target
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

bench: ## benchmarks with their targets
	GO='$(GO)' bash scripts/bench.sh

clean: ## remove build output
	rm -rf $(BIN)

# --- sandbox image and demo ---
.PHONY: sandbox-image demo demo-clean
SANDBOX_IMAGE ?= aimi-sandbox:latest

sandbox-image: ## build the sandbox image (acp-runner + git + CA certs) from Debian packages, no registry; cached (REFRESH=1: rebuild all)
	$(GO) run ./internal/sandboximage/cmd/build -tag $(SANDBOX_IMAGE) $(if $(REFRESH),-refresh)

demo: ## build everything, start aimid, run a 3-container swarm on the demo agent, show status, branches, a journal
	bash scripts/demo.sh

demo-clean: ## stop a leftover demo daemon, remove demo containers and .demo/
	bash scripts/demo.sh clean
