package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/registry"
)

// testSource is a plexus.Source whose scan and health the test controls.
type testSource struct {
	id   string
	prov plexus.Provenance

	mu      sync.Mutex
	entries []plexus.Entry
	scanErr error
	health  plexus.Health
	probes  int
	// block, when set, makes Health wait for ctx to end.
	block bool
}

func newSource(id string, prov plexus.Provenance, entries ...plexus.Entry) *testSource {
	return &testSource{id: id, prov: prov, entries: entries, health: plexus.Health{Status: plexus.HealthOK}}
}

func (s *testSource) ID() string                    { return s.id }
func (s *testSource) Provenance() plexus.Provenance { return s.prov }

func (s *testSource) Scan(context.Context) ([]plexus.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scanErr != nil {
		return nil, s.scanErr
	}
	return append([]plexus.Entry(nil), s.entries...), nil
}

func (s *testSource) Health(ctx context.Context) plexus.Health {
	s.mu.Lock()
	s.probes++
	h, block := s.health, s.block
	s.mu.Unlock()
	if block {
		<-ctx.Done()
	}
	return h
}

func (s *testSource) setEntries(es ...plexus.Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = es
}

func (s *testSource) setHealth(h plexus.Health) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.health = h
}

func (s *testSource) probeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.probes
}

func capability(src, id string, verbs ...plexus.Verb) plexus.Entry {
	return plexus.Entry{
		ID: id, Source: src, Kind: plexus.KindCapability, Label: id,
		Describe: "Does " + id + ". Use when testing.", Grants: verbs,
		Transport: plexus.TransportLocalREST, Route: json.RawMessage(`{"k":"` + id + `"}`),
	}
}

func workflow(src, id string, verbs []plexus.Verb, members ...plexus.WorkflowMember) plexus.Entry {
	return plexus.Entry{
		ID: id, Source: src, Kind: plexus.KindWorkflow, Label: id, Describe: "Runs " + id + ".",
		Grants: verbs, Transport: plexus.TransportWorkflow, Members: members,
	}
}

func member(id string, verbs ...plexus.Verb) plexus.WorkflowMember {
	return plexus.WorkflowMember{ID: id, Verbs: verbs}
}

var (
	read    = []plexus.Verb{plexus.VerbRead}
	write   = []plexus.Verb{plexus.VerbWrite}
	execute = []plexus.Verb{plexus.VerbExecute}
)

// changeLog records OnChange calls.
type changeLog struct {
	mu    sync.Mutex
	calls []changeCall
}

type changeCall struct {
	Rev                     int64
	Added, Removed, Updated []string
}

func (l *changeLog) record(rev int64, added, removed, updated []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, changeCall{rev, added, removed, updated})
}

func (l *changeLog) take() []changeCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.calls
	l.calls = nil
	return c
}

func ids(es []plexus.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func TestAddRefreshRemove(t *testing.T) {
	ctx := context.Background()
	var log changeLog
	r := registry.New(registry.Options{OnChange: log.record})
	r.SetRevision(41)
	r.SetRevision(7) // never lowers

	src := newSource("a", plexus.ProvenanceFirstParty,
		capability("a", "a.y", read...), capability("a", "a.x", read...))
	res, err := r.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a.x", "a.y"}, res.Entries); diff != "" {
		t.Errorf("AddResult.Entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]changeCall{{Rev: 42, Added: []string{"a.x", "a.y"}}}, log.take()); diff != "" {
		t.Errorf("OnChange after Add (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a.x", "a.y"}, ids(r.Entries())); diff != "" {
		t.Errorf("Entries (-want +got):\n%s", diff)
	}

	t.Run("Diff", func(t *testing.T) {
		x := capability("a", "a.x", read...)
		x.Describe = "Changed."
		src.setEntries(x, capability("a", "a.z", write...))
		if err := r.Refresh(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		want := []changeCall{{Rev: 43, Added: []string{"a.z"}, Removed: []string{"a.y"}, Updated: []string{"a.x"}}}
		if diff := cmp.Diff(want, log.take()); diff != "" {
			t.Errorf("OnChange (-want +got):\n%s", diff)
		}
		if got, _ := r.Entry("a.x"); got.Describe != "Changed." {
			t.Errorf("Entry(a.x).Describe = %q, want the rescanned text", got.Describe)
		}
	})

	t.Run("NoChangeNoRevision", func(t *testing.T) {
		if err := r.Refresh(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if got := log.take(); len(got) != 0 {
			t.Errorf("OnChange called for an unchanged rescan: %+v", got)
		}
		if got, want := r.Revision(), int64(43); got != want {
			t.Errorf("Revision() = %d, want %d", got, want)
		}
	})

	t.Run("RouteOnlyChangeIsUpdate", func(t *testing.T) {
		es, _ := src.Scan(ctx)
		es[1].Route = json.RawMessage(`{"k":"elsewhere"}`)
		src.setEntries(es...)
		if err := r.Refresh(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		want := []changeCall{{Rev: 44, Updated: []string{es[1].ID}}}
		if diff := cmp.Diff(want, log.take()); diff != "" {
			t.Errorf("OnChange (-want +got):\n%s", diff)
		}
		if got, _ := r.Entry(es[1].ID); string(got.Route) != `{"k":"elsewhere"}` {
			t.Errorf("Route = %s, want the new route", got.Route)
		}
	})

	t.Run("ErrScanKeepsEntries", func(t *testing.T) {
		src.mu.Lock()
		src.scanErr = errors.New("boom")
		src.mu.Unlock()
		if err := r.Refresh(ctx, "a"); err == nil {
			t.Fatal("Refresh with a failing scan: got nil error")
		}
		src.mu.Lock()
		src.scanErr = nil
		src.mu.Unlock()
		if got := r.Len(); got != 2 {
			t.Errorf("Len() = %d after failed refresh, want 2", got)
		}
	})

	t.Run("ErrDuplicateSource", func(t *testing.T) {
		if _, err := r.Add(ctx, newSource("a", plexus.ProvenanceManaged)); !errors.Is(err, registry.ErrDuplicateSource) {
			t.Errorf("second Add(a) error = %v, want ErrDuplicateSource", err)
		}
	})

	t.Run("Remove", func(t *testing.T) {
		if err := r.Remove(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		want := []changeCall{{Rev: 45, Removed: []string{"a.x", "a.z"}}}
		if diff := cmp.Diff(want, log.take()); diff != "" {
			t.Errorf("OnChange (-want +got):\n%s", diff)
		}
		if n := len(r.Entries()); n != 0 || len(r.Sources()) != 0 {
			t.Errorf("after Remove: %d entries, sources %v", n, r.Sources())
		}
		if err := r.Remove(ctx, "a"); !errors.Is(err, registry.ErrUnknownSource) {
			t.Errorf("Remove(unknown) error = %v, want ErrUnknownSource", err)
		}
		if err := r.Refresh(ctx, "a"); !errors.Is(err, registry.ErrUnknownSource) {
			t.Errorf("Refresh(unknown) error = %v, want ErrUnknownSource", err)
		}
	})

	t.Run("ErrScanOnAdd", func(t *testing.T) {
		bad := newSource("bad", plexus.ProvenanceManaged)
		bad.scanErr = errors.New("down")
		if _, err := r.Add(ctx, bad); err == nil {
			t.Fatal("Add with failing scan: got nil error")
		}
		if _, ok := r.Source("bad"); ok {
			t.Error("a source whose scan failed was registered")
		}
	})
}

func TestCollisionFirstClaimantWins(t *testing.T) {
	ctx := context.Background()
	var log changeLog
	r := registry.New(registry.Options{OnChange: log.record})
	a := newSource("a", plexus.ProvenanceFirstParty, capability("a", "shared.cap", read...))
	b := newSource("b", plexus.ProvenanceExtension,
		capability("b", "shared.cap", write...), capability("b", "b.own", read...))
	if _, err := r.Add(ctx, a); err != nil {
		t.Fatal(err)
	}
	res, err := r.Add(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	want := registry.AddResult{
		Entries: []string{"b.own"},
		Skipped: []registry.Skip{{ID: "shared.cap", Source: "b", ClaimedBy: "a", Reason: "id already claimed by source a"}},
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("Add(b) (-want +got):\n%s", diff)
	}
	if e, _ := r.Entry("shared.cap"); e.Source != "a" || e.Provenance != plexus.ProvenanceFirstParty {
		t.Errorf("shared.cap held by %s (%s), want a (first-party)", e.Source, e.Provenance)
	}
	// A refresh of the loser does not steal the id.
	if err := r.Refresh(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if e, _ := r.Entry("shared.cap"); e.Source != "a" {
		t.Errorf("after Refresh(b), shared.cap held by %s, want a", e.Source)
	}
	log.take()

	// When the first claimant goes, the next claimant's entry takes its place.
	if err := r.Remove(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]changeCall{{Rev: 3, Updated: []string{"shared.cap"}}}, log.take()); diff != "" {
		t.Errorf("OnChange after Remove(a) (-want +got):\n%s", diff)
	}
	if e, _ := r.Entry("shared.cap"); e.Source != "b" {
		t.Errorf("after Remove(a), shared.cap held by %q, want b", e.Source)
	}
	if got := r.Skipped("b"); len(got) != 0 {
		t.Errorf("Skipped(b) = %+v, want none", got)
	}
}

func TestInvalidEntriesSkipped(t *testing.T) {
	good := capability("s", "s.good", read...)
	withMembers := capability("s", "s.members", read...)
	withMembers.Members = []plexus.WorkflowMember{member("s.good", read...)}
	tests := []struct {
		name   string
		entry  plexus.Entry
		reason string
	}{
		{"EmptyID", capability("s", "", read...), "empty id"},
		{"WrongSource", capability("other", "s.wrong", read...), `entry source "other" is not the scanning source "s"`},
		{"UnknownKind", func() plexus.Entry { e := capability("s", "s.kind", read...); e.Kind = "gadget"; return e }(), `unknown kind "gadget"`},
		{"UnknownVerb", capability("s", "s.verb", "delete"), `grants: unknown verb "delete"`},
		{"NoVerbs", capability("s", "s.noverbs"), "a capability must require at least one verb"},
		{"NoTransport", func() plexus.Entry { e := capability("s", "s.tr", read...); e.Transport = ""; return e }(), "empty transport"},
		{"Duplicate", good, "duplicate id in the source's scan"},
		{"MembersOnCapability", withMembers, "only a workflow may have members"},
		{"WorkflowNoMembers", workflow("s", "s.wf0", execute), "a workflow must have members"},
		{"MemberBadVerb", workflow("s", "s.wf1", execute, member("s.good", "fly")), `member s.good: unknown verb "fly"`},
		{"Unencodable", func() plexus.Entry {
			e := capability("s", "s.enc", read...)
			e.Extras = map[string]any{"f": func() {}}
			return e
		}(), "entry does not encode as JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := registry.New(registry.Options{})
			res, err := r.Add(context.Background(), newSource("s", plexus.ProvenanceManaged, good, tt.entry))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"s.good"}, res.Entries); diff != "" {
				t.Errorf("Entries (-want +got):\n%s", diff)
			}
			if len(res.Skipped) != 1 || !strings.HasPrefix(res.Skipped[0].Reason, tt.reason) {
				t.Errorf("Skipped = %+v, want one with reason %q", res.Skipped, tt.reason)
			}
		})
	}
}

// sensitivity mirrors the spec's derivation closely enough to test roll-up.
func sensitivity(p plexus.Provenance, t plexus.TransportKind, verbs []plexus.Verb) plexus.Sensitivity {
	mut := false
	for _, v := range verbs {
		mut = mut || v.Mutating()
	}
	switch {
	case mut && (p == plexus.ProvenanceExtension || t == plexus.TransportCLI || t == plexus.TransportLocalREST):
		return plexus.SensitivityHigh
	case mut || p == plexus.ProvenanceExtension:
		return plexus.SensitivityElevated
	}
	return plexus.SensitivityLow
}

func window(p plexus.Provenance, verbs []plexus.Verb) plexus.TrustWindow {
	if len(verbs) == 1 && verbs[0] == plexus.VerbRead && p != plexus.ProvenanceExtension {
		return plexus.TrustWindow{Kind: plexus.Window7d}
	}
	return plexus.TrustWindow{Kind: plexus.WindowOnce}
}

func TestWorkflows(t *testing.T) {
	ctx := context.Background()
	opts := registry.Options{Sensitivity: sensitivity, DefaultWindow: window}

	t.Run("MemberChecks", func(t *testing.T) {
		skill := plexus.Entry{ID: "s.skill", Source: "s", Kind: plexus.KindSkill, Transport: plexus.TransportSkill,
			Body: &plexus.SkillBody{Format: "markdown", Markdown: "hi"}}
		src := newSource("s", plexus.ProvenanceFirstParty,
			capability("s", "s.read", read...), skill,
			workflow("s", "s.ok", execute, member("s.read", read...)),
			workflow("s", "s.missing", execute, member("s.nope", read...)),
			workflow("s", "s.wider", execute, member("s.read", plexus.VerbRead, plexus.VerbWrite)),
			workflow("s", "s.onskill", execute, member("s.skill", read...)),
			workflow("s", "s.orphan", execute, member("s.missing", execute...)),
			workflow("s", "s.cyc1", execute, member("s.cyc2", execute...)),
			workflow("s", "s.cyc2", execute, member("s.cyc1", execute...)),
			workflow("s", "s.oncycle", execute, member("s.cyc1", execute...)),
		)
		r := registry.New(opts)
		res, err := r.Add(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"s.ok", "s.read", "s.skill"}, res.Entries); diff != "" {
			t.Errorf("Entries (-want +got):\n%s", diff)
		}
		got := map[string]string{}
		for _, s := range res.Skipped {
			got[s.ID] = s.Reason
		}
		want := map[string]string{
			"s.missing": "member s.nope is not a present entry",
			"s.wider":   "member s.read: verbs [read write] exceed its grants [read]",
			"s.onskill": "member s.skill is a skill, which cannot be invoked",
			"s.orphan":  "member s.missing is not a present entry",
			"s.cyc1":    "workflow membership forms a cycle",
			"s.cyc2":    "workflow membership forms a cycle",
			"s.oncycle": "member s.cyc1 is not a present entry",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("skip reasons (-want +got):\n%s", diff)
		}
	})

	t.Run("CrossSourceMember", func(t *testing.T) {
		var log changeLog
		o := opts
		o.OnChange = log.record
		r := registry.New(o)
		tools := newSource("tools", plexus.ProvenanceManaged, capability("tools", "tools.cli.run", execute...))
		flows := newSource("flows", plexus.ProvenanceFirstParty,
			workflow("flows", "flows.run", execute, member("tools.cli.run", execute...)))
		res, err := r.Add(ctx, flows)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Entries) != 0 || len(res.Skipped) != 1 {
			t.Fatalf("workflow added before its member: %+v", res)
		}
		if _, err := r.Add(ctx, tools); err != nil {
			t.Fatal(err)
		}
		if _, ok := r.Entry("flows.run"); !ok {
			t.Error("workflow missing once its member's source was added")
		}
		log.take()
		if err := r.Remove(ctx, "tools"); err != nil {
			t.Fatal(err)
		}
		want := []changeCall{{Rev: 2, Removed: []string{"flows.run", "tools.cli.run"}}}
		if diff := cmp.Diff(want, log.take()); diff != "" {
			t.Errorf("OnChange after removing the member's source (-want +got):\n%s", diff)
		}
	})

	t.Run("SensitivityRollUp", func(t *testing.T) {
		r := registry.New(opts)
		cli := capability("s", "s.cli.write", write...)
		cli.Transport = plexus.TransportCLI
		src := newSource("s", plexus.ProvenanceFirstParty,
			capability("s", "s.read", read...), cli,
			workflow("s", "s.low", read, member("s.read", read...)),
			workflow("s", "s.mixed", execute, member("s.read", read...), member("s.cli.write", write...)),
			workflow("s", "s.outer", read, member("s.low", read...), member("s.mixed", execute...)),
		)
		if _, err := r.Add(ctx, src); err != nil {
			t.Fatal(err)
		}
		want := map[string]plexus.Sensitivity{
			"s.read":      plexus.SensitivityLow,
			"s.cli.write": plexus.SensitivityHigh,
			"s.low":       plexus.SensitivityLow,
			"s.mixed":     plexus.SensitivityHigh, // own: elevated; member: high
			"s.outer":     plexus.SensitivityHigh, // nested roll-up
		}
		got := map[string]plexus.Sensitivity{}
		for _, e := range r.Entries() {
			got[e.ID] = e.Sensitivity
			if e.Provenance != plexus.ProvenanceFirstParty {
				t.Errorf("%s: provenance %q, want first-party", e.ID, e.Provenance)
			}
			if e.RecommendedTrustWindow == nil {
				t.Errorf("%s: no recommended trust window", e.ID)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("sensitivity (-want +got):\n%s", diff)
		}
		if e, _ := r.Entry("s.read"); e.RecommendedTrustWindow.Kind != plexus.Window7d {
			t.Errorf("s.read window = %v, want 7d", e.RecommendedTrustWindow)
		}
	})

	t.Run("NilPolicyFuncsLeaveFieldsEmpty", func(t *testing.T) {
		r := registry.New(registry.Options{})
		e := capability("s", "s.read", read...)
		e.Provenance = plexus.ProvenanceFirstParty // a source cannot choose its own class
		if _, err := r.Add(ctx, newSource("s", plexus.ProvenanceExtension, e)); err != nil {
			t.Fatal(err)
		}
		got, _ := r.Entry("s.read")
		if got.Sensitivity != "" || got.RecommendedTrustWindow != nil || got.Provenance != plexus.ProvenanceExtension {
			t.Errorf("got sensitivity %q window %v provenance %q", got.Sensitivity, got.RecommendedTrustWindow, got.Provenance)
		}
	})
}

type echoTransport struct{ kind plexus.TransportKind }

func (t echoTransport) Kind() plexus.TransportKind { return t.kind }
func (t echoTransport) Dispatch(context.Context, plexus.Entry, map[string]any, plexus.DispatchContext) plexus.TransportResult {
	return plexus.TransportResult{OK: true}
}

func TestTransports(t *testing.T) {
	r := registry.New(registry.Options{})
	r.AddTransport(echoTransport{plexus.TransportPortal})
	if tr, ok := r.Transport(plexus.TransportPortal); !ok || tr.Kind() != plexus.TransportPortal {
		t.Errorf("Transport(portal) = %v, %v", tr, ok)
	}
	if _, ok := r.Transport(plexus.TransportMCP); ok {
		t.Error("Transport(mcp) found without registration")
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a kind twice did not panic")
		}
	}()
	r.AddTransport(echoTransport{plexus.TransportPortal})
}

// TestConcurrentReadsDuringChanges is for the race detector.
func TestConcurrentReadsDuringChanges(t *testing.T) {
	ctx := context.Background()
	r := registry.New(registry.Options{})
	src := newSource("s", plexus.ProvenanceManaged, capability("s", "s.0", read...))
	if _, err := r.Add(ctx, src); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				es := r.Entries()
				for i := 1; i < len(es); i++ {
					if es[i-1].ID >= es[i].ID {
						t.Errorf("Entries not sorted: %s before %s", es[i-1].ID, es[i].ID)
					}
				}
				r.Entry("s.0")
				r.SourceHealth("s")
			}
		})
	}
	for i := range 50 {
		es := make([]plexus.Entry, 0, i+1)
		for j := range i + 1 {
			es = append(es, capability("s", fmt.Sprintf("s.%d", j), read...))
		}
		src.setEntries(es...)
		if err := r.Refresh(ctx, "s"); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if got := r.Revision(); got != 50 {
		t.Errorf("Revision() = %d, want 50", got)
	}
}

// TestReplace: re-registering a source swaps it in one change (one
// revision: what was added, removed and updated), keeps the collisions it
// won, and refuses an unknown id or a failing scan without changing
// anything.
func TestReplace(t *testing.T) {
	ctx := context.Background()
	var log changeLog
	r := registry.New(registry.Options{OnChange: log.record})
	a := newSource("a", plexus.ProvenanceManaged, capability("a", "a.x", plexus.VerbRead), capability("a", "a.y", plexus.VerbRead))
	b := newSource("b", plexus.ProvenanceManaged, capability("b", "a.z", plexus.VerbRead)) // collides with a's next a.z
	if _, err := r.Add(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(ctx, b); err != nil {
		t.Fatal(err)
	}
	log.take()
	rev := r.Revision()

	changed := capability("a", "a.x", plexus.VerbRead, plexus.VerbWrite)
	res, err := r.Replace(ctx, newSource("a", plexus.ProvenanceManaged, changed, capability("a", "a.z", plexus.VerbRead)))
	if err != nil {
		t.Fatal(err)
	}
	// b claimed a.z after a was added, but a keeps its place in the
	// claim order: a's a.z wins, b's is skipped.
	if got := res.Entries; !cmp.Equal(got, []string{"a.x", "a.z"}) {
		t.Errorf("entries = %v", got)
	}
	want := []changeCall{{Rev: rev + 1, Added: nil, Removed: []string{"a.y"}, Updated: []string{"a.x", "a.z"}}}
	if diff := cmp.Diff(want, log.take()); diff != "" {
		t.Errorf("one change for a replace (-want +got):\n%s", diff)
	}
	if e, _ := r.Entry("a.z"); e.Source != "a" {
		t.Errorf("a.z is %s's", e.Source)
	}

	if _, err := r.Replace(ctx, newSource("nope", plexus.ProvenanceManaged)); !errors.Is(err, registry.ErrUnknownSource) {
		t.Errorf("replace unknown: %v", err)
	}
	bad := newSource("a", plexus.ProvenanceManaged)
	bad.scanErr = errors.New("boom")
	if _, err := r.Replace(ctx, bad); err == nil || r.Revision() != rev+1 {
		t.Errorf("a failing scan: err %v, revision %d", err, r.Revision())
	}
	if _, ok := r.Entry("a.x"); !ok {
		t.Error("a failed replace dropped the old entries")
	}
}

// TestAll checks All yields what Entries returns, in order, Health stamped,
// each step a copy the caller may stamp without touching the registry, and
// that a caller may stop early.
func TestAll(t *testing.T) {
	r := registry.New(registry.Options{})
	for _, src := range []*testSource{
		newSource("b", plexus.ProvenanceManaged, capability("b", "b.y", read...), capability("b", "b.x", read...)),
		newSource("a", plexus.ProvenanceFirstParty, capability("a", "a.z", write...)),
	} {
		if _, err := r.Add(t.Context(), src); err != nil {
			t.Fatal(err)
		}
	}
	var got []plexus.Entry
	stamp := true
	for e := range r.All() {
		got = append(got, *e)
		e.Standing = &stamp // the caller's copy
	}
	if diff := cmp.Diff(r.Entries(), got); diff != "" {
		t.Errorf("All (-Entries +All):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a.z", "b.x", "b.y"}, ids(got)); diff != "" {
		t.Errorf("All's order (-want +got):\n%s", diff)
	}
	for _, e := range r.Entries() {
		if e.Standing != nil || e.Health == nil {
			t.Errorf("%s: Standing %v, Health %v; want the registry's entry unstamped, with health", e.ID, e.Standing, e.Health)
		}
	}
	n := 0
	for range r.All() {
		n++
		break
	}
	if n != 1 {
		t.Errorf("stopped after %d steps, want 1", n)
	}
}
