package gateway

import (
	"encoding/json"
	"testing"

	"github.com/plexus-gw/plexus"
)

func TestValidate(t *testing.T) {
	schema := `{"type":"object","required":["path"],"additionalProperties":false,
		"properties":{"path":{"type":"string"},"n":{"type":"integer"},"x":{"type":["number","null"]},
		"tags":{"type":"array"},"opt":{"type":"object"},"flag":{"type":"boolean"}}}`
	open := `{"type":"object","properties":{"n":{"type":"integer"}}}`
	tests := []struct {
		name   string
		schema string
		input  string
		ok     bool
	}{
		{"OK", schema, `{"path":"a","n":3,"x":null,"tags":[],"opt":{},"flag":true}`, true},
		{"MissingRequired", schema, `{"n":3}`, false},
		{"WrongType", schema, `{"path":3}`, false},
		{"IntegerRejectsFraction", schema, `{"path":"a","n":1.5}`, false},
		{"UnionType", schema, `{"path":"a","x":2.5}`, true},
		{"UnionTypeWrong", schema, `{"path":"a","x":"s"}`, false},
		{"AdditionalPropertiesFalse", schema, `{"path":"a","extra":1}`, false},
		{"OpenSchemaAllowsExtra", open, `{"extra":1}`, true},
		{"NestedNotEnforced", schema, `{"path":"a","opt":{"anything":[1,2]}}`, true},
		{"NoSchema", "", `{"whatever":1}`, true},
		{"BooleanSchema", `true`, `{"a":1}`, true},
	}
	v := newValidator()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := plexus.Entry{ID: "x." + tt.name}
			if tt.schema != "" {
				e.IO = &plexus.IOSchema{Input: json.RawMessage(tt.schema)}
			}
			var in map[string]any
			if err := json.Unmarshal([]byte(tt.input), &in); err != nil {
				t.Fatal(err)
			}
			err := v.validate(e, in)
			if got := err == nil; got != tt.ok {
				t.Fatalf("validate(%s) ok = %v, want %v (err %v)", tt.input, got, tt.ok, err)
			}
			if err != nil && err.Code != plexus.CodeSchemaValidationFailed {
				t.Fatalf("code = %s, want schema_validation_failed", err.Code)
			}
		})
	}
}

// A changed schema for the same id must not be served from the cache.
func TestValidateCacheFollowsSchema(t *testing.T) {
	v := newValidator()
	in := map[string]any{"a": "s"}
	e := plexus.Entry{ID: "x", IO: &plexus.IOSchema{Input: json.RawMessage(`{"properties":{"a":{"type":"string"}}}`)}}
	if err := v.validate(e, in); err != nil {
		t.Fatal(err)
	}
	e.IO.Input = json.RawMessage(`{"properties":{"a":{"type":"integer"}}}`)
	if err := v.validate(e, in); err == nil {
		t.Fatal("the new schema was not applied")
	}
}

func TestNarrowItems(t *testing.T) {
	items := []plexus.PendingItem{
		{CapabilityID: "a.read", Verbs: []plexus.Verb{plexus.VerbRead}},
		{CapabilityID: "b.write", Verbs: []plexus.Verb{plexus.VerbRead, plexus.VerbWrite}},
	}
	tests := []struct {
		name    string
		d       plexus.Decision
		want    []string
		wantErr bool
	}{
		{"All", plexus.Decision{}, []string{"a.read", "b.write"}, false},
		{"FewerCapabilities", plexus.Decision{Capabilities: []string{"b.write"}}, []string{"b.write"}, false},
		{"UnrequestedCapability", plexus.Decision{Capabilities: []string{"c.exec"}}, nil, true},
		{"FewerVerbs", plexus.Decision{Capabilities: []string{"b.write"}, Verbs: []plexus.Verb{plexus.VerbRead}}, []string{"b.write"}, false},
		{"WideningVerbs", plexus.Decision{Verbs: []plexus.Verb{plexus.VerbWrite}}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := narrowItems(items, tt.d)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				if plexus.CodeOf(err) != plexus.CodeInvalidRequest {
					t.Fatalf("code = %s", plexus.CodeOf(err))
				}
				return
			}
			var ids []string
			for _, it := range got {
				ids = append(ids, it.CapabilityID)
			}
			if len(ids) != len(tt.want) {
				t.Fatalf("got %v, want %v", ids, tt.want)
			}
			for i := range ids {
				if ids[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", ids, tt.want)
				}
			}
		})
	}
	// Narrowing verbs rewrites the item's verbs without touching the input.
	got, _ := narrowItems(items, plexus.Decision{Capabilities: []string{"b.write"}, Verbs: []plexus.Verb{plexus.VerbRead}})
	if len(got[0].Verbs) != 1 || got[0].Verbs[0] != plexus.VerbRead || len(items[1].Verbs) != 2 {
		t.Fatalf("narrowed = %v, original = %v", got[0].Verbs, items[1].Verbs)
	}
}

func TestBusAudience(t *testing.T) {
	b := newBus(StreamLimits{})
	alice1 := mustSubscribe(t, b, "alice", "s1")
	alice2 := mustSubscribe(t, b, "alice", "s2")
	bob := mustSubscribe(t, b, "bob", "s3")
	b.publish(plexus.Event{ID: 1, Type: "broadcast"})
	b.publish(plexus.Event{ID: 2, Type: "agent", AgentID: "alice"})
	b.publish(plexus.Event{ID: 3, Type: "session", AgentID: "alice", SessionID: "s1", Secret: []byte(`"tok"`)})
	drain := func(s *subscriber) (ids []int64, secrets int) {
		for {
			select {
			case e := <-s.ch:
				ids = append(ids, e.ID)
				if e.Secret != nil {
					secrets++
				}
			default:
				return
			}
		}
	}
	if ids, sec := drain(alice1); len(ids) != 3 || sec != 1 {
		t.Errorf("alice s1 got %v (%d secrets), want [1 2 3] with the secret", ids, sec)
	}
	if ids, sec := drain(alice2); len(ids) != 2 || sec != 0 {
		t.Errorf("alice s2 got %v (%d secrets), want [1 2] and no secret", ids, sec)
	}
	if ids, _ := drain(bob); len(ids) != 1 {
		t.Errorf("bob got %v, want only the broadcast", ids)
	}
}

func TestBusDropsSlowSubscriber(t *testing.T) {
	b := newBus(StreamLimits{})
	s := mustSubscribe(t, b, "a", "s")
	for i := range subscriberBuffer + 1 {
		b.publish(plexus.Event{ID: int64(i + 1)})
	}
	n := 0
	for range s.ch {
		n++
	}
	if n != subscriberBuffer {
		t.Fatalf("delivered %d before dropping, want %d", n, subscriberBuffer)
	}
	b.unsubscribe(s) // closing twice must be safe
}

func TestNarrowEach(t *testing.T) {
	w1d, w7d, w1h := plexus.TrustWindow{Kind: plexus.Window1d}, plexus.TrustWindow{Kind: plexus.Window7d}, plexus.TrustWindow{Kind: plexus.Window1h}
	items := []plexus.PendingItem{
		{CapabilityID: "a.write", Verbs: []plexus.Verb{plexus.VerbRead, plexus.VerbWrite}, TrustWindow: w1d},
		{CapabilityID: "b.read", Verbs: []plexus.Verb{plexus.VerbRead}, TrustWindow: w7d,
			Constraint: &plexus.ScopeConstraint{PathPrefix: &plexus.PathPrefixConstraint{Field: "path", Allow: []string{"docs/"}}}},
	}
	narrower := &plexus.ScopeConstraint{PathPrefix: &plexus.PathPrefixConstraint{Field: "path", Allow: []string{"docs/public/"}}}
	wider := &plexus.ScopeConstraint{PathPrefix: &plexus.PathPrefixConstraint{Field: "path", Allow: []string{"other/"}}}
	tests := []struct {
		name    string
		each    []plexus.ItemDecision
		wantErr bool
		check   func(t *testing.T, got []plexus.PendingItem)
	}{
		{"KeepOne", []plexus.ItemDecision{{CapabilityID: "b.read"}}, false, func(t *testing.T, got []plexus.PendingItem) {
			if len(got) != 1 || got[0].CapabilityID != "b.read" || got[0].TrustWindow != w7d {
				t.Errorf("got %+v", got)
			}
		}},
		{"ShorterWindowEach", []plexus.ItemDecision{{CapabilityID: "a.write", TrustWindow: &w1h}, {CapabilityID: "b.read", TrustWindow: &w1d}}, false,
			func(t *testing.T, got []plexus.PendingItem) {
				if got[0].TrustWindow != w1h || got[1].TrustWindow != w1d {
					t.Errorf("windows = %v, %v", got[0].TrustWindow, got[1].TrustWindow)
				}
			}},
		{"LongerWindow", []plexus.ItemDecision{{CapabilityID: "a.write", TrustWindow: &w7d}}, true, nil},
		{"FewerVerbs", []plexus.ItemDecision{{CapabilityID: "a.write", Verbs: []plexus.Verb{plexus.VerbWrite}}}, false,
			func(t *testing.T, got []plexus.PendingItem) {
				if len(got[0].Verbs) != 1 || got[0].Verbs[0] != plexus.VerbWrite {
					t.Errorf("verbs = %v", got[0].Verbs)
				}
			}},
		{"AddedVerb", []plexus.ItemDecision{{CapabilityID: "b.read", Verbs: []plexus.Verb{plexus.VerbWrite}}}, true, nil},
		{"NarrowerConstraint", []plexus.ItemDecision{{CapabilityID: "b.read", Constraint: narrower}}, false,
			func(t *testing.T, got []plexus.PendingItem) {
				if got[0].Constraint != narrower {
					t.Errorf("constraint = %+v", got[0].Constraint)
				}
			}},
		{"WiderConstraint", []plexus.ItemDecision{{CapabilityID: "b.read", Constraint: wider}}, true, nil},
		{"Unrequested", []plexus.ItemDecision{{CapabilityID: "c.exec"}}, true, nil},
		{"Twice", []plexus.ItemDecision{{CapabilityID: "b.read"}, {CapabilityID: "b.read"}}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := narrowItems(items, plexus.Decision{Items: tt.each})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				if plexus.CodeOf(err) != plexus.CodeInvalidRequest {
					t.Fatalf("code = %s", plexus.CodeOf(err))
				}
				return
			}
			tt.check(t, got)
		})
	}
	if _, err := narrowItems(items, plexus.Decision{Items: []plexus.ItemDecision{{CapabilityID: "b.read"}}, Verbs: []plexus.Verb{plexus.VerbRead}}); err == nil {
		t.Error("per-capability and whole-request narrowing together must be refused")
	}
}
