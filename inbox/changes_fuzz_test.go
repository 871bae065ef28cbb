package inbox

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// changesOriginals are the decisions FuzzChanges compares edited files
// with; the fuzzer picks one by its first argument.
func changesOriginals() []func() plexus.Pending {
	return []func() plexus.Pending{grantFixture, bundleFixture, executeFixture}
}

// FuzzChanges edits a decision as an owner edits its file and compares the
// result with the decision as the journal holds it. The fuzzer picks the
// decision, which capabilities stay (and whether one is added), and for one
// of them the verbs, the window and the constraint (as YAML flow text, the
// way it is written in the file). Whatever the edit, Changes never widens:
// a refusal is a *WideningError naming at least one edit, and an accepted
// narrowing keeps only requested capabilities in the request's order, each
// with a non-empty subset of the requested verbs, a valid window no longer
// than asked (once stays once), and a constraint that admits no call the
// requested one refuses (checked on a fuzzed call input, not only by
// auth.Narrows).
func FuzzChanges(f *testing.F) {
	f.Add(uint8(0), uint8(0xff), uint8(1), "7d", "", `{"path":"Inbox/a.md"}`)
	f.Add(uint8(1), uint8(0xff), uint8(3), "1d12h", "{pathPrefix: {field: path, allow: [Inbox]}, match: [{field: mode, op: in, values: [append, create]}]}", `{"path":"Inbox/a.md","mode":"append"}`)
	f.Add(uint8(1), uint8(0x13), uint8(3), "36h", "{pathPrefix: {field: path, allow: [Inbox, Journal/2026, .]}}", `{"path":"Secrets/k","mode":"append"}`)
	f.Add(uint8(1), uint8(0x17), uint8(3), "1h", "{pathPrefix: {field: path, allow: [Inbox/../Secrets]}, match: [{field: mode, op: in, values: [append]}]}", `{"path":"Secrets/k","mode":"append"}`)
	f.Add(uint8(1), uint8(0x03), uint8(7), "until-revoked", "{allow: {field: name, values: [a.md]}}", `{"name":"a.md"}`)
	f.Add(uint8(1), uint8(0x24), uint8(1), "1d", "{match: [{field: n, op: eq, value: 1}]}", `{"n":1.0}`)
	f.Add(uint8(2), uint8(0x01), uint8(4), "once", "", `{}`)
	f.Add(uint8(2), uint8(0x81), uint8(4), "1h", "{}", `{}`)
	originals := changesOriginals()
	f.Fuzz(func(t *testing.T, which, keep, verbs uint8, window, constraint, input string) {
		orig := originals[int(which)%len(originals)]()
		file := editedFile(t, orig, keep, verbs, window, constraint)
		if file == nil {
			return // the edit is not a file Parse reads: FuzzParse owns that
		}
		n, err := Changes(orig, file)
		if err != nil {
			var we *WideningError
			if !errors.As(err, &we) || len(we.Widenings) == 0 {
				t.Fatalf("Changes = %v (%T), want a *WideningError naming an edit", err, err)
			}
			return
		}
		var in map[string]any
		_ = json.Unmarshal([]byte(input), &in) // a refused input is a nil map: a call with no input
		requireNarrower(t, orig, n, in)
	})
}

// editedFile renders orig, edits the capabilities as the fuzzer says (bit i
// of keep keeps capability i, bit 7 adds one never requested; capability
// keep>>4 gets verbs from the bits of verbs, window and constraint) and
// parses the result, or returns nil when it does not parse.
func editedFile(t *testing.T, orig plexus.Pending, keep, verbs uint8, window, constraint string) *File {
	t.Helper()
	file, err := Parse([]byte(mustRender(t, orig, RenderOptions{})))
	if err != nil {
		t.Fatal(err)
	}
	var caps []FileCapability
	for i, c := range file.Capabilities {
		if keep&(1<<i) != 0 {
			caps = append(caps, c)
		}
	}
	if keep&0x80 != 0 && !slices.ContainsFunc(caps, func(c FileCapability) bool { return c.ID == "shell.run" }) {
		caps = append(caps, FileCapability{ID: "shell.run", Verbs: []plexus.Verb{plexus.VerbExecute}, Window: plexus.TrustWindow{Kind: plexus.WindowOnce}})
	}
	if len(caps) > 0 {
		c := &caps[int(keep>>4)%len(caps)]
		c.Verbs = nil
		for i, v := range []plexus.Verb{plexus.VerbRead, plexus.VerbWrite, plexus.VerbExecute} {
			if verbs&(1<<i) != 0 {
				c.Verbs = append(c.Verbs, v)
			}
		}
		if len(c.Verbs) == 0 {
			return nil // Parse refuses a capability with no verbs
		}
		if c.Window, err = ParseWindow(window); err != nil {
			return nil
		}
		if constraint != "" {
			// The constraint goes through the file's own parser, as an
			// owner's edit would.
			doc := "---\nplexus: decision/1\nid: x\ncapabilities: [{id: x, verbs: read, window: 1h, constraint: " + constraint + "}]\n---\n"
			cf, err := Parse([]byte(doc))
			if err != nil || len(cf.Capabilities) != 1 {
				return nil
			}
			c.Constraint = cf.Capabilities[0].Constraint
		}
	}
	file.Capabilities = caps
	return file
}

// requireNarrower checks that every item of n grants no more than orig
// asked, and that a call n's constraints admit is one orig's admit.
func requireNarrower(t *testing.T, orig plexus.Pending, n Narrowing, in map[string]any) {
	t.Helper()
	if len(n.Items) == 0 {
		t.Fatal("accepted a narrowing that keeps no capability")
	}
	last := -1
	for _, it := range n.Items {
		i := slices.IndexFunc(orig.Items, func(o plexus.PendingItem) bool { return o.CapabilityID == it.CapabilityID })
		if i <= last {
			t.Fatalf("%s was not requested, or is out of the request's order", it.CapabilityID)
		}
		last = i
		asked := orig.Items[i]
		if len(it.Verbs) == 0 || !plexus.CoversVerbs(asked.Verbs, it.Verbs) {
			t.Fatalf("%s: verbs %v are not a non-empty subset of %v", it.CapabilityID, it.Verbs, asked.Verbs)
		}
		if !auth.ValidWindow(it.TrustWindow) || auth.WindowDuration(it.TrustWindow) > auth.WindowDuration(asked.TrustWindow) {
			t.Fatalf("%s: window %+v is longer than the %+v asked", it.CapabilityID, it.TrustWindow, asked.TrustWindow)
		}
		if asked.TrustWindow.Kind == plexus.WindowOnce && it.TrustWindow.Kind != plexus.WindowOnce {
			t.Fatalf("%s: a once grant became %+v", it.CapabilityID, it.TrustWindow)
		}
		if asked.Constraint != nil && (it.Constraint == nil || auth.SatisfiedResolved(it.Constraint, in, nil) && !auth.SatisfiedResolved(asked.Constraint, in, nil)) {
			t.Fatalf("%s: constraint %+v admits the input %v, which the requested %+v refuses", it.CapabilityID, it.Constraint, in, asked.Constraint)
		}
	}
	if n.Capabilities != nil && len(n.Capabilities) != len(n.Items) {
		t.Fatalf("kept capabilities %v disagree with the items", n.Capabilities)
	}
}
