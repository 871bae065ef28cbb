package registry

// This file derives the entry set from the registered sources. The entry set
// is a pure function of the sources (in add order) and their last scans: it
// is rebuilt whole on every change, so a removed source's collisions and
// dangling workflow members resolve the same way whatever the history.

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/plexus-gw/plexus"
)

// snapshot is an immutable view of the entry set. A rebuild replaces it
// whole (copy-on-write), so readers take the pointer under a read lock and
// then use it without any lock.
type snapshot struct {
	sorted    []plexus.Entry               // by id; Health always nil
	index     map[string]int               // id → position in sorted
	finger    map[string][sha256.Size]byte // id → content fingerprint
	bySource  map[string][]string          // source id → its entry ids, sorted
	sourceIDs []string                     // sources that contribute entries
}

func emptySnapshot() *snapshot {
	return &snapshot{
		index:    map[string]int{},
		finger:   map[string][sha256.Size]byte{},
		bySource: map[string][]string{},
	}
}

// candidate is one scanned entry on its way into the entry set.
type candidate struct {
	e   plexus.Entry
	src *sourceState
	raw [sha256.Size]byte // fingerprint of the entry as scanned
}

// rebuildLocked recomputes the entry set from r.order, replaces the
// snapshot, records each source's skips and, when the set changed, bumps the
// revision. The caller holds wmu and mu (write).
func (r *Registry) rebuildLocked() change {
	skips := make(map[*sourceState][]Skip, len(r.order))
	skip := func(st *sourceState, s Skip) {
		skips[st] = append(skips[st], s)
	}
	cands := r.claim(skip)
	settleWorkflows(cands, skip)
	next := r.stamp(cands)
	r.recordSkips(skips)

	ch := diff(r.snap, next)
	r.snap = next
	if !ch.empty() {
		r.revision++
		ch.rev = r.revision
	}
	return ch
}

// claim validates each scanned entry alone and lets sources claim ids in
// their add order: the first source keeps an id, a later one is skipped
// with the owner named.
func (r *Registry) claim(skip func(*sourceState, Skip)) map[string]*candidate {
	cands := make(map[string]*candidate)
	for _, st := range r.order {
		sid := st.src.ID()
		for _, e := range st.scanned {
			if reason := validateEntry(e, sid); reason != "" {
				skip(st, Skip{ID: e.ID, Source: sid, Reason: reason})
				continue
			}
			raw, err := rawFingerprint(e)
			if err != nil {
				skip(st, Skip{ID: e.ID, Source: sid, Reason: "entry does not encode as JSON: " + err.Error()})
				continue
			}
			if prev, ok := cands[e.ID]; ok {
				if prev.src == st {
					skip(st, Skip{ID: e.ID, Source: sid, Reason: "duplicate id in the source's scan"})
				} else {
					owner := prev.src.src.ID()
					skip(st, Skip{ID: e.ID, Source: sid, ClaimedBy: owner,
						Reason: fmt.Sprintf("id already claimed by source %s", owner)})
				}
				continue
			}
			cands[e.ID] = &candidate{e: e, src: st, raw: raw}
		}
	}
	return cands
}

// settleWorkflows drops the workflows whose members are not present,
// invocable entries whose grants cover the member verbs, and those in a
// cycle, then raises each survivor's verbs to its members'. Dropping one
// workflow can orphan another, so it iterates to a fixpoint.
func settleWorkflows(cands map[string]*candidate, skip func(*sourceState, Skip)) {
	for {
		dropped := dropBadWorkflows(cands, skip)
		dropped += dropCycles(cands, skip)
		if dropped == 0 {
			break
		}
	}
	raiseWorkflows(cands)
}

// stamp builds the next snapshot from the surviving candidates: each entry
// stamped with its source's provenance, its sensitivity and recommended
// window, and fingerprinted, in id order.
func (r *Registry) stamp(cands map[string]*candidate) *snapshot {
	ids := slices.Sorted(maps.Keys(cands))
	sens := make(map[string]plexus.Sensitivity, len(cands))
	next := &snapshot{
		sorted:   make([]plexus.Entry, 0, len(ids)),
		index:    make(map[string]int, len(ids)),
		finger:   make(map[string][sha256.Size]byte, len(ids)),
		bySource: make(map[string][]string),
	}
	for _, id := range ids {
		c := cands[id]
		e := c.e
		prov := c.src.src.Provenance()
		e.Provenance = prov
		e.Sensitivity = r.sensitivity(cands, sens, id, nil)
		e.RecommendedTrustWindow = nil
		if r.opts.DefaultWindow != nil {
			w := r.opts.DefaultWindow(prov, e.Grants)
			e.RecommendedTrustWindow = &w
		}
		e.Health = nil
		next.index[id] = len(next.sorted)
		next.sorted = append(next.sorted, e)
		next.finger[id] = stampedFingerprint(c.raw, e)
		next.bySource[e.Source] = append(next.bySource[e.Source], id)
	}
	next.sourceIDs = slices.Sorted(maps.Keys(next.bySource))
	return next
}

// recordSkips keeps each source's skips of this rebuild, logging a skip once,
// when it first appears, not on every rebuild.
func (r *Registry) recordSkips(skips map[*sourceState][]Skip) {
	for _, st := range r.order {
		before := make(map[Skip]bool, len(st.skipped))
		for _, s := range st.skipped {
			before[s] = true
		}
		for _, s := range skips[st] {
			if !before[s] {
				r.log.Warn("registry: entry skipped", "source", s.Source, "entry", s.ID,
					"reason", s.Reason, "claimedBy", s.ClaimedBy)
			}
		}
		st.skipped = skips[st]
	}
}

// validateEntry checks an entry alone; it returns "" when the entry is valid
// or the reason it is not.
func validateEntry(e plexus.Entry, sourceID string) string {
	switch {
	case strings.TrimSpace(e.ID) == "":
		return "empty id"
	case e.Source != sourceID:
		return fmt.Sprintf("entry source %q is not the scanning source %q", e.Source, sourceID)
	case e.Transport == "":
		return "empty transport"
	}
	switch e.Kind {
	case plexus.KindCapability, plexus.KindWorkflow, plexus.KindSkill:
	default:
		return fmt.Sprintf("unknown kind %q", e.Kind)
	}
	if reason := checkVerbs(e.Grants); reason != "" {
		return "grants: " + reason
	}
	if e.Kind != plexus.KindSkill && len(e.Grants) == 0 {
		return "a " + string(e.Kind) + " must require at least one verb"
	}
	if e.Kind == plexus.KindWorkflow {
		if len(e.Members) == 0 {
			return "a workflow must have members"
		}
		for _, m := range e.Members {
			if m.ID == "" {
				return "workflow member with empty id"
			}
			if m.ID == e.ID {
				return "workflow lists itself as a member"
			}
			if len(m.Verbs) == 0 {
				return fmt.Sprintf("member %s: no verbs", m.ID)
			}
			if reason := checkVerbs(m.Verbs); reason != "" {
				return fmt.Sprintf("member %s: %s", m.ID, reason)
			}
		}
	} else if len(e.Members) > 0 {
		return "only a workflow may have members"
	}
	return ""
}

func checkVerbs(verbs []plexus.Verb) string {
	for _, v := range verbs {
		if !v.Valid() {
			return fmt.Sprintf("unknown verb %q", v)
		}
	}
	return ""
}

// dropBadWorkflows removes workflows with a missing, non-invocable or
// under-granted member and returns how many it removed.
func dropBadWorkflows(cands map[string]*candidate, skip func(*sourceState, Skip)) int {
	dropped := 0
	for _, id := range sortedWorkflows(cands) {
		c := cands[id]
		if reason := memberProblem(c.e, cands); reason != "" {
			delete(cands, id)
			skip(c.src, Skip{ID: id, Source: c.e.Source, Reason: reason})
			dropped++
		}
	}
	return dropped
}

func memberProblem(e plexus.Entry, cands map[string]*candidate) string {
	for _, m := range e.Members {
		mc, ok := cands[m.ID]
		if !ok {
			return fmt.Sprintf("member %s is not a present entry", m.ID)
		}
		if mc.e.Kind == plexus.KindSkill {
			return fmt.Sprintf("member %s is a skill, which cannot be invoked", m.ID)
		}
		if !plexus.CoversVerbs(mc.e.Grants, m.Verbs) {
			return fmt.Sprintf("member %s: verbs %v exceed its grants %v", m.ID, m.Verbs, mc.e.Grants)
		}
	}
	return ""
}

// raiseWorkflows makes each workflow require the union of its own verbs and
// everything its members require, transitively, and runs each member with
// all the verbs that member requires: a grant of the workflow then covers
// exactly what its calls need (the member scopes it synthesizes included),
// and the owner approves those verbs, not the author's declaration. Cycles
// were dropped before.
func raiseWorkflows(cands map[string]*candidate) {
	done := map[string]bool{}
	var raise func(id string) []plexus.Verb
	raise = func(id string) []plexus.Verb {
		c, ok := cands[id]
		if !ok {
			return nil
		}
		if c.e.Kind != plexus.KindWorkflow || done[id] {
			return c.e.Grants
		}
		done[id] = true
		members := slices.Clone(c.e.Members) // the source's copy stays as scanned
		for i, m := range members {
			members[i].Verbs = plexus.NormalizeVerbs(append(slices.Clone(m.Verbs), raise(m.ID)...))
		}
		c.e.Members = members
		c.e.Grants = workflowVerbs(c.e.Grants, members, func(string) []plexus.Verb { return nil })
		return c.e.Grants
	}
	for _, id := range sortedWorkflows(cands) {
		raise(id)
	}
}

// dropCycles removes every workflow that lies on a membership cycle (the
// workflow transport would re-enter itself forever) and returns how many.
func dropCycles(cands map[string]*candidate, skip func(*sourceState, Skip)) int {
	const (
		unvisited = iota
		onStack
		done
	)
	state := make(map[string]int)
	var cyclic []string
	var stack []string
	var visit func(id string)
	visit = func(id string) {
		state[id] = onStack
		stack = append(stack, id)
		for _, m := range cands[id].e.Members {
			mc, ok := cands[m.ID]
			if !ok || mc.e.Kind != plexus.KindWorkflow {
				continue
			}
			switch state[m.ID] {
			case unvisited:
				visit(m.ID)
			case onStack:
				i := slices.Index(stack, m.ID)
				cyclic = append(cyclic, stack[i:]...)
			}
		}
		stack = stack[:len(stack)-1]
		state[id] = done
	}
	for _, id := range sortedWorkflows(cands) {
		if state[id] == unvisited {
			visit(id)
		}
	}
	slices.Sort(cyclic)
	cyclic = slices.Compact(cyclic)
	for _, id := range cyclic {
		c := cands[id]
		delete(cands, id)
		skip(c.src, Skip{ID: id, Source: c.e.Source, Reason: "workflow membership forms a cycle"})
	}
	return len(cyclic)
}

func sortedWorkflows(cands map[string]*candidate) []string {
	var ids []string
	for id, c := range cands {
		if c.e.Kind == plexus.KindWorkflow {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// sensitivity returns the entry's derived sensitivity, memoized in memo. A
// workflow takes the maximum (by Rank) of its own derivation and its
// members'. Cycles were removed before stamping; seen guards anyway.
func (r *Registry) sensitivity(cands map[string]*candidate, memo map[string]plexus.Sensitivity, id string, seen map[string]bool) plexus.Sensitivity {
	if s, ok := memo[id]; ok {
		return s
	}
	c := cands[id]
	var s plexus.Sensitivity
	if r.opts.Sensitivity != nil {
		s = r.opts.Sensitivity(c.src.src.Provenance(), c.e.Transport, c.e.Grants)
	}
	if c.e.Kind == plexus.KindWorkflow {
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[id] = true
		for _, m := range c.e.Members {
			if seen[m.ID] {
				continue
			}
			if ms := r.sensitivity(cands, memo, m.ID, seen); ms.Rank() > s.Rank() {
				s = ms
			}
		}
		delete(seen, id)
	}
	memo[id] = s
	return s
}

// rawFingerprint hashes a scanned entry's JSON together with its Route bytes
// (which the JSON omits), so a route-only change counts as an update. The
// fields the registry stamps are cleared first; [stampedFingerprint] adds
// them back. An entry that does not marshal would break the manifest, so the
// error rejects it.
func rawFingerprint(e plexus.Entry) ([sha256.Size]byte, error) {
	e.Provenance, e.Sensitivity, e.RecommendedTrustWindow, e.Health = "", "", nil, nil
	b, err := json.Marshal(e)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	h := sha256.New()
	h.Write(b)
	h.Write([]byte{0})
	h.Write(bytes.TrimSpace(e.Route))
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out, nil
}

// stampedFingerprint folds the stamped fields into a raw fingerprint: a
// member's sensitivity change updates the workflow that rolls it up.
func stampedFingerprint(raw [sha256.Size]byte, e plexus.Entry) [sha256.Size]byte {
	h := sha256.New()
	h.Write(raw[:])
	fmt.Fprintf(h, "\x00%s\x00%s", e.Provenance, e.Sensitivity)
	if w := e.RecommendedTrustWindow; w != nil {
		fmt.Fprintf(h, "\x00%s\x00%d", w.Kind, w.Ms)
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

func diff(old, next *snapshot) change {
	var ch change
	for id, f := range next.finger {
		of, ok := old.finger[id]
		switch {
		case !ok:
			ch.added = append(ch.added, id)
		case of != f:
			ch.updated = append(ch.updated, id)
		}
	}
	for id := range old.finger {
		if _, ok := next.finger[id]; !ok {
			ch.removed = append(ch.removed, id)
		}
	}
	slices.Sort(ch.added)
	slices.Sort(ch.removed)
	slices.Sort(ch.updated)
	return ch
}
