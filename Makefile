# Plexus — the two commands a new machine needs are `make run` and `make test`.
GO          ?= go
BIN         := bin/plexus
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
export CGO_ENABLED := 1

.PHONY: build run test conformance chromium fuzz bench lint fmt clean

build:
	$(GO) build -o $(BIN) ./cmd/plexus

# The MCP conformance suite, both pinned versions (mcpserver/testdata/conformance):
# server mode against /mcp (mcpserver's TestConformance), and client mode, Plexus
# as the client of each scenario's test server through the driver in
# internal/conformance/client, checked against its baseline.yml
# (e2e's TestConformanceClient). make test runs both too.
conformance:
	npm ci --prefix mcpserver/testdata/conformance --no-audit --no-fund
	$(GO) test -race -count=1 -run '^TestConformance$$' ./mcpserver/
	$(GO) test -race -count=1 -run '^TestConformanceClient$$' ./e2e/

# Starts the gateway in the foreground on its embedded defaults
# (PLEXUS_HOME=~/.plexus, 127.0.0.1:7077), creating the home on first start.
run: build
	./$(BIN) serve

# vet, staticcheck, then every unit and integration test with the race detector,
# then every fuzz target for TESTFUZZTIME each (one at a time: a few seconds
# apiece keeps the whole under three minutes on two cores).
# The MCP client's tests run real MCP servers, pinned in examples/mcp; the MCP
# front door's, the MCP conformance suite, Node 22 and the TypeScript SDK,
# pinned in mcpserver/testdata/conformance.
TESTFUZZTIME ?= 3s
test: chromium
	$(GO) mod download
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	npm ci --prefix examples/mcp --no-audit --no-fund
	npm ci --prefix mcpserver/testdata/conformance --no-audit --no-fund
	$(GO) test -race -count=1 -timeout 40m ./...
	GO=$(GO) FUZZTIME=$(TESTFUZZTIME) ./scripts/fuzz.sh

# The console's browser tests (e2e/console_browser_test.go) drive a headless
# Chromium: Debian's chromium is installed when no chromium, chromium-browser
# or google-chrome is on PATH (CI runs as root).
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null || \
		{ apt-get update && apt-get install -y chromium; }

# Every fuzz target for FUZZTIME each, one after the other:
# make fuzz FUZZTIME=10m. A failing input lands in the package's
# testdata/fuzz/<Target>/; commit it with the fix (docs/fuzzing.md).
FUZZTIME ?= 1m
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

# Benchmarks print ratios against a baseline measured in the same run.
# The DESIGN.md figures live in e2e/bench_test.go; each benchmark times
# itself (fixed rounds or sample counts), so -benchtime 1x runs each body once,
# and the last one prints the table of figures against their bars. The
# transports' per-call overheads against calling the same backend directly
# come first (go test runs the packages' benchmarks one after the other).
bench:
	npm ci --prefix examples/mcp --no-audit --no-fund
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 -timeout 20m ./transports/cliexec/ ./transports/stdio/ ./transports/mcpclient/ ./transports/ipc/ ./e2e/

lint:
	gofmt -l . | tee /dev/stderr | (! read)
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

fmt:
	gofmt -w .

clean:
	rm -rf bin
