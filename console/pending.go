package console

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	nethttp "net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/inbox"
)

// DecisionView is one pending decision as its inbox file tells it: the
// frontmatter's fields, and the body's sections (what Plexus says, what it
// reaches, what approving means, the agent's own words) as the file's
// markdown lines, for the page to show as text.
type DecisionView struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Agent        string           `json:"agent"`
	Created      time.Time        `json:"created"`
	Expires      time.Time        `json:"expires"`
	SameUser     bool             `json:"sameUser,omitempty"`
	Bundle       string           `json:"bundle,omitempty"`
	Purpose      string           `json:"purpose,omitempty"`
	Problem      string           `json:"problem,omitempty"`
	File         string           `json:"file"`
	Title        string           `json:"title"`
	Capabilities []CapabilityView `json:"capabilities"`
	Sections     []Section        `json:"sections"`
	// Definition is a changed definition's whole before and now, from the
	// pending decision (its file cuts long ones): approving pins all of New.
	Definition *DefinitionView `json:"definition,omitempty"`
}

// DefinitionView is a changed definition, each side as indented JSON.
type DefinitionView struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// CapabilityView is one capability of a decision file.
type CapabilityView struct {
	ID          string   `json:"id"`
	Verbs       []string `json:"verbs"`
	Window      string   `json:"window"`
	Provenance  string   `json:"provenance,omitempty"`
	Sensitivity string   `json:"sensitivity,omitempty"`
}

// Section is one `## ` section of a decision file's body. Agent marks the
// one that quotes the agent's own words, which Plexus has not checked.
type Section struct {
	Title string   `json:"title"`
	Lines []string `json:"lines"`
	Agent bool     `json:"agent,omitempty"`
}

// PendingResponse is the body of GET /console/api/pending.
type PendingResponse struct {
	Pending []DecisionView `json:"pending"`
}

// Sections of a decision file the console does not show: it offers the
// moves itself.
var skipSections = []string{"How to decide", "How to narrow"}

const agentSection = "The agent says"

func (c *Console) handlePending(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	list, err := c.opts.Owner.AdminPending(r.Context(), o.creds)
	if err != nil {
		writeError(w, nethttp.StatusBadGateway, "the gateway did not list the pending decisions: "+err.Error())
		return
	}
	out := PendingResponse{Pending: []DecisionView{}}
	for _, p := range list.Pending {
		if p.State != plexus.StatePending {
			continue
		}
		// A decision is put up before its file is written: until the file
		// is there, the page has nothing to show it by (the write wakes it).
		b, err := inbox.ReadFile(filepath.Join(c.opts.Home, plexus.FolderInbox, inbox.FileName(p.ID)))
		if err != nil {
			continue
		}
		v, err := pendingView(p, b)
		if err != nil {
			continue
		}
		out.Pending = append(out.Pending, v)
	}
	writeJSON(w, nethttp.StatusOK, out)
}

// pendingView is pending decision p as its file b tells it, with the
// whole of a changed definition from p itself.
func pendingView(p plexus.Pending, b []byte) (DecisionView, error) {
	v, err := decisionView(b)
	if err != nil {
		return v, err
	}
	if v.ID != p.ID {
		return v, fmt.Errorf("the file of %s names %s", p.ID, v.ID)
	}
	if d := p.Definition; d != nil {
		v.Definition = &DefinitionView{Old: indentJSON(d.Old), New: indentJSON(d.New)}
	}
	return v, nil
}

// indentJSON is raw indented, or as it is when it is not JSON.
func indentJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// decisionView reads decision file b.
func decisionView(b []byte) (DecisionView, error) {
	f, err := inbox.Parse(b)
	if err != nil {
		return DecisionView{}, err
	}
	v := DecisionView{ID: f.ID, Type: f.Type, Agent: f.Agent, Created: f.Created, Expires: f.Expires, SameUser: f.SameUser,
		Bundle: f.Bundle, Purpose: f.Purpose, Problem: f.Problem, File: plexus.FolderInbox + "/" + inbox.FileName(f.ID),
		Capabilities: []CapabilityView{}}
	for _, fc := range f.Capabilities {
		win, err := inbox.FormatWindow(fc.Window)
		if err != nil {
			win = "?"
		}
		cv := CapabilityView{ID: fc.ID, Window: win, Provenance: string(fc.Provenance), Sensitivity: string(fc.Sensitivity)}
		for _, vb := range fc.Verbs {
			cv.Verbs = append(cv.Verbs, string(vb))
		}
		v.Capabilities = append(v.Capabilities, cv)
	}
	v.Title, v.Sections = bodySections(b)
	return v, nil
}

// bodySections splits the body of decision file b (after its frontmatter)
// into its title and its `## ` sections.
func bodySections(b []byte) (string, []Section) {
	var title string
	var out []Section
	delims := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), inbox.MaxFileSize)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case delims < 2:
			if strings.TrimSpace(line) == "---" {
				delims++
			}
		case strings.HasPrefix(line, "# ") && title == "" && len(out) == 0:
			title = strings.TrimPrefix(line, "# ")
		case strings.HasPrefix(line, "## "):
			t := strings.TrimPrefix(line, "## ")
			out = append(out, Section{Title: t, Lines: []string{}, Agent: t == agentSection})
		case len(out) > 0 && (line != "" || len(out[len(out)-1].Lines) > 0):
			out[len(out)-1].Lines = append(out[len(out)-1].Lines, line)
		}
	}
	return title, slices.DeleteFunc(out, func(s Section) bool { return slices.Contains(skipSections, s.Title) })
}

// DecideRequest is the body of POST /console/api/pending/{id}/{approve|deny}.
// Keep, Verbs and Window narrow an approval; Reason is required to deny.
type DecideRequest struct {
	Reason string                   `json:"reason,omitempty"`
	Window string                   `json:"window,omitempty"`
	Keep   []string                 `json:"keep,omitempty"`
	Verbs  map[string][]plexus.Verb `json:"verbs,omitempty"`
}

// DecideResponse says what the daemon made of the decision.
type DecideResponse struct {
	Message string `json:"message"`
}

// handleDecide makes the owner's decision the way `plexus approve` and
// `plexus reject` do: the decision file is stamped (who, via console, the
// narrowing) and moved to active/ or rejected/, and the daemon's
// reconciler turns the move into the gateway's one decision, whose
// outcome this waits for.
func (c *Console) handleDecide(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	action := r.PathValue("action")
	if action != "approve" && action != "deny" {
		writeError(w, nethttp.StatusNotFound, "a decision is approve or deny")
		return
	}
	var req DecideRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, nethttp.StatusBadRequest, "the decision could not be read: "+err.Error())
		return
	}
	stamp, err := stampOptions(action == "approve", req)
	if err != nil {
		writeError(w, nethttp.StatusBadRequest, err.Error())
		return
	}
	if err := c.sameAsShown(r.PathValue("id"), req); err != nil {
		writeError(w, nethttp.StatusConflict, err.Error())
		return
	}
	stamp.DecidedBy, stamp.Via = c.opts.Decider(), plexus.ViaConsole
	var out bytes.Buffer
	m := &inbox.OwnerMove{Home: c.opts.Home, ID: r.PathValue("id"), Approve: action == "approve", Stamp: stamp, Out: &out}
	err = m.Run(r.Context(), func() (inbox.Daemon, error) { return ownerDaemon{c: c, creds: o.creds}, nil })
	var me *inbox.MoveError
	var ne *inbox.NarrowError
	switch {
	case errors.As(err, &ne):
		writeError(w, nethttp.StatusBadRequest, ne.Error())
	case errors.As(err, &me):
		writeError(w, nethttp.StatusConflict, me.Error())
	case err != nil:
		writeError(w, nethttp.StatusInternalServerError, err.Error())
	default:
		c.Changed()
		writeJSON(w, nethttp.StatusOK, DecideResponse{Message: strings.TrimSpace(out.String())})
	}
}

// errFileChanged is the answer to an approval naming what the decision's
// file no longer holds.
var errFileChanged = errors.New("the file changed since the page showed it; look again")

// sameAsShown refuses an approval whose capabilities and verbs (the page
// sends all it showed and left ticked) are not all in decision id's file
// now: the owner would approve something else than what was shown.
func (c *Console) sameAsShown(id string, req DecideRequest) error {
	if req.Keep == nil && req.Verbs == nil || !inbox.ValidID(id) {
		return nil // nothing shown to hold to, or OwnerMove refuses the id
	}
	b, err := inbox.ReadFile(filepath.Join(c.opts.Home, plexus.FolderInbox, inbox.FileName(id)))
	if err != nil {
		return nil // OwnerMove says what became of it
	}
	f, err := inbox.Parse(b)
	if err != nil {
		return nil // OwnerMove refuses a file that does not parse
	}
	has := map[string][]plexus.Verb{}
	for _, fc := range f.Capabilities {
		has[fc.ID] = fc.Verbs
	}
	for _, id := range req.Keep {
		if _, ok := has[id]; !ok {
			return errFileChanged
		}
	}
	for id, vs := range req.Verbs {
		fv, ok := has[id]
		for _, v := range vs {
			if !ok || !slices.Contains(fv, v) {
				return errFileChanged
			}
		}
	}
	return nil
}

// stampOptions checks req for an approval or a denial.
func stampOptions(approve bool, req DecideRequest) (inbox.StampOptions, error) {
	s := inbox.StampOptions{Reason: strings.TrimSpace(req.Reason), Keep: req.Keep, Verbs: req.Verbs}
	if !approve {
		if s.Reason == "" {
			return s, errors.New("say why you deny: the agent is told")
		}
		if req.Window != "" || req.Keep != nil || req.Verbs != nil {
			return s, errors.New("a denial narrows nothing")
		}
		return s, nil
	}
	if req.Window != "" {
		w, err := inbox.ParseWindow(req.Window)
		if err != nil {
			return s, fmt.Errorf("window: %w", err)
		}
		s.Window = &w
	}
	return s, nil
}

// ownerDaemon is the gateway as an owner's move asks it, from inside the
// daemon.
type ownerDaemon struct {
	c     *Console
	creds gateway.Credentials
}

func (d ownerDaemon) Pending(ctx context.Context, id string) (plexus.Pending, error) {
	p, err := d.c.opts.Owner.AdminShowPending(ctx, d.creds, id)
	if plexus.CodeOf(err) == plexus.CodeNotFound {
		return p, fmt.Errorf("%w: %w", inbox.ErrUnknown, err)
	}
	return p, err
}

func (d ownerDaemon) MintedToken(ctx context.Context, p plexus.Pending) (string, error) {
	if d.c.opts.Tokens == nil {
		return "", errors.New("no journal to read")
	}
	return d.c.opts.Tokens.MintedOnApproval(ctx, p.TraceID, p.ID)
}
