package console

import (
	"context"
	nethttp "net/http"
	"strconv"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// ActivityQuery selects journal rows for the Journal page: by trace,
// agent, action type (exact, or a prefix ending in '.'), and age; at most
// Limit rows, the newest, returned oldest first.
type ActivityQuery struct {
	TraceID, AgentID, Type string
	Since                  time.Time
	Limit                  int
}

// Activity reads the journal (the daemon hands it journal.DB.Newest).
type Activity func(ctx context.Context, q ActivityQuery) ([]plexus.Activity, error)

// journalLimit caps the rows one page of the timeline shows.
const journalLimit = 200

// JournalRow is one journal row as the page shows it: without the chain's
// hashes, which mean nothing to a person.
type JournalRow struct {
	ID      int64          `json:"id"`
	TS      time.Time      `json:"ts"`
	TraceID string         `json:"traceId"`
	Actor   string         `json:"actor"`
	AgentID string         `json:"agentId,omitempty"`
	Type    string         `json:"type"`
	Target  string         `json:"target,omitempty"`
	Payload map[string]any `json:"payload,omitempty"`
}

// JournalResponse is the body of GET /console/api/journal.
type JournalResponse struct {
	Rows []JournalRow `json:"rows"`
}

// sinceChoices are the ages the page offers.
var sinceChoices = map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour}

// handleJournal answers the timeline (?agent=&type=&since=1h|24h|7d) or,
// with ?trace=, every row of one trace: its story.
func (c *Console) handleJournal(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	if c.opts.Activity == nil {
		writeError(w, nethttp.StatusNotFound, "this console has no journal to read")
		return
	}
	q := r.URL.Query()
	aq := ActivityQuery{TraceID: strings.TrimSpace(q.Get("trace")), AgentID: strings.TrimSpace(q.Get("agent")),
		Type: strings.TrimSpace(q.Get("type")), Limit: journalLimit}
	if s := q.Get("since"); s != "" {
		d, ok := sinceChoices[s]
		if !ok {
			writeError(w, nethttp.StatusBadRequest, "since must be 1h, 24h or 7d")
			return
		}
		aq.Since = c.opts.Clock().Add(-d)
	}
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 && n < journalLimit {
		aq.Limit = n
	}
	rows, err := c.opts.Activity(r.Context(), aq)
	if err != nil {
		writeError(w, nethttp.StatusInternalServerError, "the journal could not be read")
		c.log.Warn("console: read the journal", "err", err)
		return
	}
	out := JournalResponse{Rows: make([]JournalRow, 0, len(rows))}
	for _, a := range rows {
		out.Rows = append(out.Rows, JournalRow{ID: a.ID, TS: a.TS, TraceID: a.TraceID, Actor: a.Actor, AgentID: a.AgentID,
			Type: a.ActionType, Target: a.Target, Payload: a.Payload})
	}
	writeJSON(w, nethttp.StatusOK, out)
}
