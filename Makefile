# osaurus-sandbox: `make install` puts the app on PATH, `make run` runs it,
# `make test` runs every test. Each installs what it needs first.

GO         ?= go
BIN        := bin
APP        := $(BIN)/osaurus-sandbox
AGENT_DIR  := assets/agent
AGENTS     := $(AGENT_DIR)/sandbox-agent-linux-amd64 $(AGENT_DIR)/sandbox-agent-linux-arm64 \
              $(AGENT_DIR)/osaurus-host-linux-amd64 $(AGENT_DIR)/osaurus-host-linux-arm64
# The Debian-built test guest is cached outside the tree so a fresh clone
# (and CI on the same machine) reuses it.
TEST_GUEST ?= $(HOME)/.cache/osaurus-sandbox/test-guest
# Debian's kernel of the test guest, unpacked, for the module resolver's
# real-kernel test. Each step of test-guest (kernel, guest, this unpack)
# builds beside its output and renames it into place under a lock, so runs
# sharing the cache are safe.
TEST_KERNEL := $(TEST_GUEST)-kernel
# The guest's own kernel (scripts/build-kernel.sh), cached outside the tree
# like the test guest; the script rebuilds it only when its inputs change.
KERNEL_CACHE ?= $(HOME)/.cache/osaurus-sandbox/kernel
KERNEL_ARCH  ?= $(shell $(GO) env GOARCH)
GOTEST_FLAGS ?= -race -timeout 40m
# The e2e package runs beside the others without the race detector: its
# work in the test process (provisioning: gunzip and ext4 of the guest)
# ran several times slower under it and took the cores QEMU's TCG needs;
# the owner's code it drives is race-tested in its own packages. The
# others run one package at a time (-p 1), as they did beside it before.
E2E_FLAGS    ?= -timeout 80m
STATICCHECK := v0.8.2
# `make install` copies the app to $(BINDIR): ~/.local/bin by default, a
# folder the user owns (no sudo); PREFIX=/usr/local for every user.
PREFIX ?= $(HOME)/.local
BINDIR ?= $(PREFIX)/bin

UNAME_S      := $(shell uname -s)
VERSION      ?= 0.1.0
ENTITLEMENTS := entitlements.plist
APP_BUNDLE   := $(BIN)/Osaurus Sandbox.app

export GOTOOLCHAIN := local

.PHONY: all run build install agent deps deps-test test test-guest kernel kernel-all unit e2e bench soak lint clean darwin-check app mac-only fuzz fuzz-short

all: build

deps:
	@scripts/install-deps.sh run

deps-test:
	@scripts/install-deps.sh test

# The guest agent is a static binary for both guest architectures, embedded
# into the app.
agent: $(AGENTS)

$(AGENT_DIR)/sandbox-agent-linux-%: $(shell find agentproto errdefs netpolicy vm/bootparams guestagent cmd/sandbox-agent -name '*.go' 2>/dev/null) go.mod
	CGO_ENABLED=0 GOOS=linux GOARCH=$* $(GO) build -trimpath -ldflags='-s -w' -o $@ ./cmd/sandbox-agent

# osaurus-host, the guest's bridge client, ships next to the agent; the app
# copies it into every guest at boot.
$(AGENT_DIR)/osaurus-host-linux-%: $(shell find cmd/osaurus-host -name '*.go' 2>/dev/null) go.mod
	CGO_ENABLED=0 GOOS=linux GOARCH=$* $(GO) build -trimpath -ldflags='-s -w' -o $@ ./cmd/osaurus-host

build: agent
	$(GO) build -ldflags='-X github.com/osaurus/osaurus-sandbox/hostcli.Version=$(VERSION)' -o $(APP) ./cmd/osaurus-sandbox
ifeq ($(UNAME_S),Darwin)
	codesign --force --sign - --entitlements $(ENTITLEMENTS) $(APP)
endif

# Type-checks every darwin/arm64 file (tests included) against stand-ins of
# the vz API generated from the module cache, then builds the packages that
# need no cgo for darwin/arm64. Needs only Go.
darwin-check:
	$(GO) run ./internal/darwincheck/cmd/darwincheck

# Osaurus Sandbox.app: Info.plist from assets/, the icon packed from
# assets/AppIcon.png, the signed binary (with both guest agents embedded).
app: mac-only build
	rm -rf "$(APP_BUNDLE)"
	mkdir -p "$(APP_BUNDLE)/Contents/MacOS" "$(APP_BUNDLE)/Contents/Resources"
	sed -e 's/@VERSION@/$(VERSION)/g' -e 's/@EXECUTABLE@/osaurus-sandbox/g' \
		assets/Info.plist.tmpl > "$(APP_BUNDLE)/Contents/Info.plist"
	plutil -lint "$(APP_BUNDLE)/Contents/Info.plist"
	cp $(APP) "$(APP_BUNDLE)/Contents/MacOS/osaurus-sandbox"
	$(GO) run ./scripts/appicon -icns "$(APP_BUNDLE)/Contents/Resources/AppIcon.icns" assets/AppIcon.png
	codesign --force --sign - --entitlements $(ENTITLEMENTS) "$(APP_BUNDLE)"
	codesign --verify --strict --verbose=2 "$(APP_BUNDLE)"
	@echo 'built $(APP_BUNDLE): open "$(APP_BUNDLE)"'

mac-only:
	@[ "$$(uname -s)" = Darwin ] || { echo "make $(MAKECMDGOALS): needs macOS with the Xcode command-line tools (xcode-select --install)" >&2; exit 1; }

run: deps build
	$(APP)

# The app on PATH: MCP clients' config files name this copy, which stays
# where it is when the clone is cleaned or moved.
install: deps build
	install -d "$(BINDIR)"
	install -m 0755 $(APP) "$(BINDIR)/osaurus-sandbox"
	@echo "installed $(BINDIR)/osaurus-sandbox"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; *) \
		echo "$(BINDIR) is not on your PATH: add it (for example: echo 'export PATH=\"$(BINDIR):\$$PATH\"' >> ~/.profile), then open a new terminal" ;; esac

# The guest kernel for this machine's architecture: $(KERNEL_CACHE)/ARCH/vmlinuz.
kernel:
	scripts/build-kernel.sh $(KERNEL_ARCH) $(KERNEL_CACHE)/$(KERNEL_ARCH)

# Both architectures' kernels (arm64's is the Mac's: a cross build here).
kernel-all:
	scripts/build-kernel.sh amd64 $(KERNEL_CACHE)/amd64
	scripts/build-kernel.sh arm64 $(KERNEL_CACHE)/arm64

test-guest: deps-test
	scripts/build-kernel.sh amd64 $(KERNEL_CACHE)/amd64
	scripts/build-test-guest.sh $(TEST_GUEST) $(KERNEL_CACHE)/amd64
	scripts/unpack-test-kernel.sh $(TEST_GUEST) $(TEST_KERNEL)

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK) ./...

TEST_ENV = OSAURUS_TEST_GUEST=$(TEST_GUEST) OSAURUS_TEST_KERNEL_MODULES=$$(echo $(TEST_KERNEL)/lib/modules/*)

test: deps-test agent test-guest lint darwin-check
	$(TEST_ENV) $(GO) test $(GOTEST_FLAGS) -p 1 $$($(GO) list ./... | grep -v '/e2e$$') & unit=$$!; \
	$(TEST_ENV) $(GO) test $(E2E_FLAGS) ./e2e/; e2e=$$?; \
	wait $$unit; unit=$$?; \
	[ $$e2e -eq 0 ] && [ $$unit -eq 0 ] || { echo "make test: unit packages exit $$unit, e2e exit $$e2e"; exit 1; }
	$(MAKE) fuzz-short

# Every fuzz target (the host's parsers of guest-, agent- and image-host
# bytes), each for FUZZTIME. A crasher is written to the package's
# testdata/fuzz/<Target>/ and fails the run: keep it there as a seed and
# fix the bug. `make test` runs each for FUZZTIME_SHORT executions (a count,
# not a time: a deadline can end a target while it still replays its cached
# corpus, which fails it on a loaded machine).
FUZZTIME       ?= 30s
FUZZTIME_SHORT ?= 300x
FUZZ_PKGS = $(sort $(dir $(shell grep -rl --include='*_test.go' '^func Fuzz' .)))

fuzz:
	@set -e; for d in $(FUZZ_PKGS); do \
		for t in $$($(GO) test -list '^Fuzz' $$d | grep '^Fuzz'); do \
			echo "fuzz $$d $$t ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$d; \
		done; \
	done

fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

unit: deps-test agent lint darwin-check
	$(GO) test $(GOTEST_FLAGS) -short ./...

# 10,010 tool calls through the stdio MCP server, checking that nothing
# grows with them (BenchmarkSoak; `make bench` makes 1,100).
SOAK_ROUNDS ?= 910
soak: agent test-guest
	$(TEST_ENV) $(GO) test -run "^$$" -bench "^BenchmarkSoak$$" -benchtime $(SOAK_ROUNDS)x -timeout 2h ./e2e/

bench: agent test-guest
	$(TEST_ENV) $(GO) test -run "^$$" -bench "^Benchmark(BootVsBare|ProvisionFromCache|AppIdle|VMDeath|DiskQuota|ResourceLimits|Checkpoint)$$" -benchtime 1x ./e2e/
	$(TEST_ENV) $(GO) test -run "^$$" -bench "^BenchmarkResumeExec$$" -benchtime 10x ./e2e/
	$(TEST_ENV) $(GO) test -run "^$$" -bench "^Benchmark(ExecTrue|FileWriteRead1MiB)$$" -benchtime 2s ./e2e/
	$(TEST_ENV) $(GO) test -run "^$$" -bench "^BenchmarkExecTrueLayers$$" -benchtime 18x ./e2e/
	$(TEST_ENV) $(GO) test -run "^$$" -bench "^BenchmarkSessionExec$$" -benchtime 20x ./e2e/
	$(TEST_ENV) $(GO) test -run "^$$" -bench "^BenchmarkSoak$$" -benchtime 100x ./e2e/
	$(GO) test -run "^$$" -bench "^BenchmarkUnaryRoundTrip$$" -benchtime 2s ./agentproto/
	$(GO) test -run "^$$" -bench "^BenchmarkMemoryQuery100k$$" -benchtime 200x ./store/memory/
	$(GO) test -run "^$$" -bench "^BenchmarkTrackerRefresh$$" -benchtime 20x ./diskquota/

clean:
	rm -rf $(BIN) $(AGENTS)
