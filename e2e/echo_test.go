package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/plexus-gw/plexus"
)

// echoKind is an in-process transport that returns its input: the "echo
// capability" the benchmarks and the pipeline tests call, so they measure and
// exercise the gateway rather than a backend.
const echoKind plexus.TransportKind = "test-echo"

type echoTransport struct{}

func (echoTransport) Kind() plexus.TransportKind { return echoKind }

func (echoTransport) Dispatch(_ context.Context, _ plexus.Entry, input map[string]any, _ plexus.DispatchContext) plexus.TransportResult {
	return plexus.TransportResult{OK: true, Data: input}
}

// echoSource offers one echo entry per verb set: test.echo.read (read),
// test.echo.write (write) and test.echo.run (execute), each taking
// {"msg": string (required), "n": integer}.
type echoSource struct {
	id   string
	prov plexus.Provenance
}

func (s echoSource) ID() string                    { return s.id }
func (s echoSource) Provenance() plexus.Provenance { return s.prov }
func (s echoSource) Health(context.Context) plexus.Health {
	return plexus.Health{Status: plexus.HealthOK}
}

func (s echoSource) Scan(context.Context) ([]plexus.Entry, error) {
	in := json.RawMessage(`{"type":"object","required":["msg"],"properties":{"msg":{"type":"string"},"n":{"type":"integer"}}}`)
	mk := func(name string, v plexus.Verb) plexus.Entry {
		return plexus.Entry{ID: s.id + ".echo." + name, Source: s.id, Kind: plexus.KindCapability, Label: "Echo " + name,
			Describe: "Echo the input back. Use when testing the gateway.", IO: &plexus.IOSchema{Input: in},
			Grants: []plexus.Verb{v}, Transport: echoKind}
	}
	return []plexus.Entry{mk("read", plexus.VerbRead), mk("write", plexus.VerbWrite), mk("run", plexus.VerbExecute)}, nil
}

// addEcho registers the echo transport and an echo source ("test", first
// party unless prov says otherwise) on a running test daemon.
func addEcho(t testing.TB, td *testDaemon, id string, prov plexus.Provenance) {
	t.Helper()
	td.Registry().AddTransport(echoTransport{})
	if prov == "" {
		prov = plexus.ProvenanceFirstParty
	}
	if _, err := td.Registry().Add(context.Background(), echoSource{id: id, prov: prov}); err != nil {
		t.Fatal(err)
	}
}
