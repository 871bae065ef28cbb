package e2e

// The MCP front door's figures (DESIGN.md's bar "MCP front door tools/call
// (/mcp; plexus mcp serve) vs the same client calling the server directly
// (HTTP; stdio)"), measured as bench_test.go measures every figure: once,
// on its own clock, against its baseline in the same run, reported as
// ratios; BenchmarkZZSummary prints them with the others.

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/mcpserver"
)

// benchMCPProtocol is the protocol version every client of these figures
// asks for, direct or through Plexus, so both sides of a ratio speak the
// same one: 2025-11-25, with sessions, is what hosts speak today and what
// `plexus mcp serve` speaks to the daemon.
const benchMCPProtocol = "2025-11-25"

// The figures' names, in benchOrder.
const (
	figureFrontHTTP  = "MCP front door tools/call via /mcp vs direct (Streamable HTTP)"
	figureFrontStdio = "MCP front door tools/call via plexus mcp serve vs direct (stdio)"
)

// benchGreetID is the drift server's greet tool behind Plexus (source "bench").
const benchGreetID = "mcp.bench.greet"

// BenchmarkMCPFrontHTTP: a Go SDK client calling the drift server's greet
// tool through the front door (/mcp over loopback Streamable HTTP, the PAT
// of an agent holding a standing grant; the daemon's mcp transport then
// calls the server over Streamable HTTP), against the same client calling
// the same server (its own process, Streamable HTTP) directly, in the same
// run. Bars: latency ≤ 1.3 × direct (p50, one sequential caller) and
// throughput ≥ 0.8 × direct (8 concurrent callers on one session).
func BenchmarkMCPFrontHTTP(b *testing.B) {
	oneShot(b, func(b *testing.B, m map[string]float64) {
		url := startDriftHTTP(b)
		td := startTestDaemon(b, daemon.Options{RateLimit: 1e9})
		benchMCPConfig(b, td, fmt.Sprintf(`{"mcpServers":{"bench":{"url":%q}}}`, url))
		pat := benchGrantedAgent(b, td, "bench-http")
		via := benchMCPConnect(b, "bench-host", &mcp.StreamableClientTransport{Endpoint: td.BaseURL() + "/mcp",
			HTTPClient: benchBearerClient(pat)})
		direct := benchMCPConnect(b, "bench-host", &mcp.StreamableClientTransport{Endpoint: url,
			HTTPClient: benchHTTPClient(benchClients)})
		r := benchVersus(b, greetCaller(b, direct, "greet"), greetCaller(b, via, frontToolName(b, via)), nil)
		r.report(b, m, figureFrontHTTP, "Streamable HTTP")
		// Context, no bar: the same call through /invoke (the gateway, the
		// journal, the mcp transport: all of the way but the front door).
		inv := sampleLatency(b, 300, greetInvoker(b, td), benchLatencyTime/2)
		m["invoke-p50-µs"] = us(percentile(inv, 50))
	})
}

// BenchmarkMCPFrontStdio: a Go SDK client launching `plexus mcp serve
// --agent` (the built binary, reading the credential `plexus clients
// connect` stores) and calling greet through it — the bridge forwards to
// the daemon's /mcp, whose mcp transport calls the drift server over
// stdio — against the same client launching the drift server and calling
// it over stdio directly, in the same run. Bars as for /mcp.
func BenchmarkMCPFrontStdio(b *testing.B) {
	oneShot(b, func(b *testing.B, m map[string]float64) {
		self, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		via, serve := bridgedDrift(b, self)
		drift := exec.Command(self)
		drift.Env = append(os.Environ(), driftServerEnv+"=1")
		direct := benchMCPConnect(b, "bench-host", &mcp.CommandTransport{Command: drift})
		bridge := serve.Process.Pid
		r := benchVersus(b, greetCaller(b, direct, "greet"), greetCaller(b, via, frontToolName(b, via)),
			func() time.Duration { return childCPU(bridge) })
		r.report(b, m, figureFrontStdio, "stdio")
		m["bridge-cpu-µs/call"] = r.viaOtherCPU
	})
}

// startDriftHTTP runs the drift server (the test binary, see TestMain)
// serving Streamable HTTP on a free loopback port, stopped at the end of
// the benchmark, and returns its URL once it accepts connections.
func startDriftHTTP(b *testing.B) string {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), driftServerEnv+"=1", "DRIFT_HTTP_ADDR="+addr)
	var errOut syncBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			b.Errorf("stop the drift server: %v", err)
		}
		if err := cmd.Wait(); err != nil {
			b.Errorf("drift server: %v: %s", err, errOut.String())
		}
	})
	waitFor(b, 10*time.Second, "the drift server's HTTP listener", func() string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err.Error() + ": " + errOut.String()
		}
		if err := c.Close(); err != nil {
			return err.Error()
		}
		return ""
	})
	return "http://" + addr + "/"
}

// benchMCPConfig writes the owner's mcp.json and waits until the bench
// server's greet tool is in the catalog.
func benchMCPConfig(b *testing.B, td *testDaemon, cfg string) {
	b.Helper()
	if err := os.WriteFile(filepath.Join(td.Home().Dir, "mcp.json"), []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	waitFor(b, 20*time.Second, "the bench server's tools", holds(func() bool {
		_, ok := td.Registry().Entry(benchGreetID)
		return ok
	}))
}

// benchGrantedAgent connects and enrolls agent id with a standing read
// grant for greet, as `plexus clients connect --grant` does, and returns
// its PAT.
func benchGrantedAgent(b *testing.B, td *testDaemon, id string) string {
	b.Helper()
	var conn plexus.ConnectResponse
	req := plexus.ConnectRequest{AgentID: id, Grants: []plexus.ConnectGrant{{CapabilityID: benchGreetID, Verbs: []plexus.Verb{plexus.VerbRead}}}}
	if st := td.call(b, "POST", "/admin/api/agents/connect", td.admin(), req, &conn); st/100 != 2 || len(conn.Grants) != 1 {
		b.Fatalf("connect: status %d, %+v", st, conn)
	}
	var enr plexus.EnrollResponse
	if st := td.call(b, "POST", "/agents/enroll", nil, plexus.EnrollRequest{Code: conn.Code}, &enr); st != http.StatusOK {
		b.Fatalf("enroll: status %d", st)
	}
	return enr.PAT
}

// benchBearerClient is a keep-alive client for benchClients callers that
// bears pat on every request, as a host's config does.
func benchBearerClient(pat string) *http.Client {
	return &http.Client{Transport: bearerTransport{pat: pat, base: benchHTTPClient(benchClients).Transport}}
}

type bearerTransport struct {
	pat  string
	base http.RoundTripper
}

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.pat)
	return t.base.RoundTrip(r)
}

// benchMCPConnect connects a client named name over t at benchMCPProtocol;
// the session is closed at the end of the benchmark.
func benchMCPConnect(b *testing.B, name string, t mcp.Transport) *mcp.ClientSession {
	b.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil).Connect(b.Context(), t,
		&mcp.ClientSessionOptions{ProtocolVersion: benchMCPProtocol})
	if err != nil {
		b.Fatal(err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != benchMCPProtocol {
		b.Fatalf("negotiated protocol %s, want %s", v, benchMCPProtocol)
	}
	b.Cleanup(func() {
		if err := cs.Close(); err != nil {
			b.Logf("close %s session: %v", name, err)
		}
	})
	return cs
}

// frontToolName is the tool the front door shows for greet, found by the
// capability id in its _meta.
func frontToolName(b *testing.B, cs *mcp.ClientSession) string {
	b.Helper()
	res, err := cs.ListTools(b.Context(), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range res.Tools {
		if t.Meta[mcpserver.MetaCapability] == benchGreetID {
			return t.Name
		}
	}
	b.Fatalf("no tool for %s among %d", benchGreetID, len(res.Tools))
	return ""
}

// greetInvoker calls greet once through /invoke, as an agent holding a
// standing grant for it, and checks the greeting came back.
func greetInvoker(b *testing.B, td *testDaemon) func() error {
	_, sid := benchAgent(b, td, "bench-invoke")
	hdr := bearer(grantAllowed(b, td, sid, map[string]any{benchGreetID: "allow"}))
	body := []byte(`{"id":"` + benchGreetID + `","input":{"name":"plexus"}}`)
	c := benchHTTPClient(1)
	return func() error {
		st, raw, err := benchDo(c, http.MethodPost, td.BaseURL()+"/invoke", hdr, body)
		if err != nil {
			return err
		}
		if st != http.StatusOK || !strings.Contains(string(raw), "hello plexus") {
			return fmt.Errorf("invoke: status %d: %s", st, raw)
		}
		return nil
	}
}

// greetCaller calls tool (greet, by the name cs knows it) once and checks
// the greeting came back.
func greetCaller(b *testing.B, cs *mcp.ClientSession, tool string) func() error {
	ctx := b.Context()
	return func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"name": "plexus"}})
		if err != nil {
			return fmt.Errorf("call %s: %w", tool, err)
		}
		if res.IsError || len(res.Content) != 1 {
			return fmt.Errorf("call %s: %+v", tool, res.Content)
		}
		if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "hello plexus" {
			return fmt.Errorf("call %s: %+v", tool, res.Content[0])
		}
		return nil
	}
}

// versus is one comparison of a path through Plexus with the direct one.
type versus struct {
	viaLat, directLat []time.Duration // sorted
	viaRPS, directRPS float64
	// CPU per call of this process (the client; through /mcp, the daemon
	// too), under the throughput load: the servers' processes are not in it.
	viaCPU, directCPU float64
	// Heap allocations and bytes per call of this process, counted as
	// its CPU is (through plexus mcp serve, the bridge's process is not
	// in it).
	viaAllocs, directAllocs, viaBytes, directBytes float64
	// viaOtherCPU is the CPU per call, under the same load, of the other
	// process on the way through Plexus (plexus mcp serve), when measured.
	viaOtherCPU float64
}

// childCPU is the CPU time the process pid has used so far (Linux's
// /proc; 0 where it cannot be read).
func childCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which closes with ')':
	// utime and stime are the 12th and 13th, in clock ticks (100 a second).
	_, rest, ok := strings.Cut(string(raw), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// heapCounts are this process's heap allocations and bytes so far.
func heapCounts() (allocs, bytes uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs, ms.TotalAlloc
}

// benchVersus measures direct and via alike, interleaved so drift hits
// both: latency of one sequential caller, then throughput of benchClients
// concurrent callers; other, when given, is the CPU time so far of
// another process on the way through Plexus.
func benchVersus(b *testing.B, direct, via func() error, other func() time.Duration) versus {
	b.Helper()
	var r versus
	for range benchRounds {
		r.directLat = append(r.directLat, sampleLatency(b, 300, direct, benchLatencyTime/2)...)
		r.viaLat = append(r.viaLat, sampleLatency(b, 300, via, benchLatencyTime/2)...)
	}
	slices.Sort(r.viaLat)
	slices.Sort(r.directLat)
	var vn, dn int64
	var vt, dt, vcpu, dcpu time.Duration
	var va, da, vb, db uint64
	var ocpu time.Duration
	for range benchRounds {
		c0 := processCPU()
		a0, b0 := heapCounts()
		n, d, err := benchLoad(benchClients, benchRound, direct)
		if err != nil {
			b.Fatal(err)
		}
		c1 := processCPU()
		a1, b1 := heapCounts()
		dn, dt, dcpu, da, db = dn+n, dt+d, dcpu+c1-c0, da+a1-a0, db+b1-b0
		var o0 time.Duration
		if other != nil {
			o0 = other()
		}
		n, d, err = benchLoad(benchClients, benchRound, via)
		if err != nil {
			b.Fatal(err)
		}
		if other != nil {
			ocpu += other() - o0
		}
		a2, b2 := heapCounts()
		vn, vt, vcpu, va, vb = vn+n, vt+d, vcpu+processCPU()-c1, va+a2-a1, vb+b2-b1
	}
	r.viaRPS, r.directRPS = float64(vn)/vt.Seconds(), float64(dn)/dt.Seconds()
	r.viaCPU, r.directCPU = us(vcpu)/float64(vn), us(dcpu)/float64(dn)
	r.viaOtherCPU = us(ocpu) / float64(vn)
	r.viaAllocs, r.directAllocs = float64(va)/float64(vn), float64(da)/float64(dn)
	r.viaBytes, r.directBytes = float64(vb)/float64(vn), float64(db)/float64(dn)
	return r
}

// report records r as the figure name (the p50 latency ratio, the
// throughput ratio in its note) and as b's metrics.
func (r versus) report(b *testing.B, m map[string]float64, name, wire string) {
	vp50, dp50 := percentile(r.viaLat, 50), percentile(r.directLat, 50)
	lat, thr := float64(vp50)/float64(dp50), r.viaRPS/r.directRPS
	m["plexus-p50-µs"], m["direct-p50-µs"], m["latency-ratio"] = us(vp50), us(dp50), lat
	m["plexus-p99-µs"], m["direct-p99-µs"] = us(percentile(r.viaLat, 99)), us(percentile(r.directLat, 99))
	m["plexus-calls/s"], m["direct-calls/s"], m["throughput-ratio"] = r.viaRPS, r.directRPS, thr
	m["plexus-cpu-µs/call"], m["direct-cpu-µs/call"] = r.viaCPU, r.directCPU
	m["plexus-allocs/call"], m["direct-allocs/call"] = r.viaAllocs, r.directAllocs
	m["plexus-B/call"], m["direct-B/call"] = r.viaBytes, r.directBytes
	setFigure(name, benchFigure{value: lat, unit: "× lat", bar: "≤ 1.3 × lat, ≥ 0.8 × thr",
		ok: lat <= 1.3 && thr >= 0.8,
		note: fmt.Sprintf("p50 %.0f vs %.0f µs; throughput %.2f× (%.0f vs %.0f calls/s, %d callers)",
			us(vp50), us(dp50), thr, r.viaRPS, r.directRPS, benchClients)})
	b.Logf("%s: latency p50 via Plexus %.0f µs, direct (%s) %.0f µs (%.2f×, bar ≤ 1.3); p99 %.0f vs %.0f µs; "+
		"throughput with %d callers %.0f vs %.0f calls/s (%.2f×, bar ≥ 0.8)",
		name, us(vp50), wire, us(dp50), lat, us(percentile(r.viaLat, 99)), us(percentile(r.directLat, 99)),
		benchClients, r.viaRPS, r.directRPS, thr)
}

// BenchmarkMCPFrontCalls is BenchmarkMCPFrontHTTP's call through /mcp
// alone, b.N times in sequence, as a plain benchmark (no figure for the
// summary): ns/op and allocs/op of one tools/call, client and daemon in
// this process, the drift server in its own. It is what a profile of the
// front door's own cost, or a count of its instructions (perf stat at two
// b.N), runs.
func BenchmarkMCPFrontCalls(b *testing.B) {
	url := startDriftHTTP(b)
	td := startTestDaemon(b, daemon.Options{RateLimit: 1e9})
	benchMCPConfig(b, td, fmt.Sprintf(`{"mcpServers":{"bench":{"url":%q}}}`, url))
	pat := benchGrantedAgent(b, td, "bench-http")
	via := benchMCPConnect(b, "bench-host", &mcp.StreamableClientTransport{Endpoint: td.BaseURL() + "/mcp",
		HTTPClient: benchBearerClient(pat)})
	call := greetCaller(b, via, frontToolName(b, via))
	for range 200 { // the connections, caches and token warm
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMCPFrontStdioCalls is BenchmarkMCPFrontStdio's call through
// `plexus mcp serve` alone, b.N times in sequence, as a plain benchmark (no
// figure for the summary): ns/op and allocs/op of one tools/call of this
// process (the client and the daemon; the bridge and the drift server run
// in their own), and the bridge's CPU per call (bridge-cpu-µs/op). It is
// what a profile of the daemon's side of `mcp serve`, or an strace of the
// bridge's process, runs.
func BenchmarkMCPFrontStdioCalls(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	via, serve := bridgedDrift(b, self)
	call := greetCaller(b, via, frontToolName(b, via))
	for range 200 { // the connections, caches and token warm
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	bridge := serve.Process.Pid
	b.ReportAllocs()
	b.ResetTimer()
	c0 := childCPU(bridge)
	for b.Loop() {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(us(childCPU(bridge)-c0)/float64(b.N), "bridge-cpu-µs/op")
}

// bridgedDrift starts a daemon serving the drift server (this binary, over
// stdio) to an agent pre-granted its tools, and connects a host to it
// through `plexus mcp serve` (serve, the bridge's process).
func bridgedDrift(b *testing.B, self string) (via *mcp.ClientSession, serve *exec.Cmd) {
	b.Helper()
	td := startTestDaemon(b, daemon.Options{RateLimit: 1e9})
	benchMCPConfig(b, td, fmt.Sprintf(`{"mcpServers":{"bench":{"command":%q,"env":{%q:"1"}}}}`, self, driftServerEnv))
	pat := benchGrantedAgent(b, td, "bench-stdio")
	store, err := client.HostStore(td.Home().Dir, "bench-stdio")
	if err != nil {
		b.Fatal(err)
	}
	if err := store.SaveCredentials(client.Credentials{BaseURL: td.BaseURL(), AgentID: "bench-stdio", PAT: pat}, false); err != nil {
		b.Fatal(err)
	}
	serve = exec.Command(plexusBin(b), "--home", td.Home().Dir, "mcp", "serve", "--agent", "bench-stdio")
	return benchMCPConnect(b, "bench-host", &mcp.CommandTransport{Command: serve}), serve
}
