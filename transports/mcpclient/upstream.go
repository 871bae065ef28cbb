package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

var (
	_ plexus.Completer          = (*Transport)(nil)
	_ plexus.ResourceSubscriber = (*Transport)(nil)
)

// client is the Client of entry's source, or why there is none.
func (t *Transport) client(entry plexus.Entry) (*Client, *plexus.Error) {
	t.mu.RLock()
	c := t.clients[entry.Source]
	t.mu.RUnlock()
	if c == nil {
		return nil, plexus.Errorf(plexus.CodeSourceUnavailable, "no MCP server is attached for source %s", entry.Source)
	}
	return c, nil
}

// Complete sends completion/complete for the entry's prompt (ref/prompt,
// its upstream name) or resource template (ref/resource, its uriTemplate),
// params its argument and context, and answers the server's result.
func (t *Transport) Complete(ctx context.Context, entry plexus.Entry, params json.RawMessage) (json.RawMessage, error) {
	c, perr := t.client(entry)
	if perr != nil {
		return nil, perr
	}
	var rt route
	if err := json.Unmarshal(entry.Route, &rt); err != nil {
		return nil, plexus.Errorf(plexus.CodeTransportError, "the entry has no valid mcp route")
	}
	ref := &mcp.CompleteReference{Type: "ref/prompt", Name: rt.Name}
	switch rt.Primitive {
	case "prompt":
	case "resourceTemplate":
		ref = &mcp.CompleteReference{Type: "ref/resource", URI: rt.Template}
	default:
		return nil, plexus.Errorf(plexus.CodeInvalidRequest, "%s is a %s: only a prompt or a resource template completes arguments", entry.ID, rt.Primitive)
	}
	var p mcp.CompleteParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, plexus.Errorf(plexus.CodeInvalidRequest, "the completion's params do not decode: %s", err.Error())
	}
	p.Ref = ref
	s, why := c.current()
	if s == nil {
		return nil, plexus.Errorf(plexus.CodeSourceUnavailable, "the MCP server %s is not connected: %s", c.name, why)
	}
	if s.caps.Completions == nil {
		return nil, plexus.Errorf(plexus.CodeInvalidRequest, "the MCP server %s offers no completions", c.name)
	}
	res, err := s.cs.Complete(ctx, &p)
	if err != nil {
		return nil, c.callError(ctx, err, "completion/complete", entry.ID)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, plexus.WrapError(plexus.CodeInternalError, err, "the completion does not encode")
	}
	return out, nil
}

// SubscribeResource subscribes to uri on the entry's server, once for
// however many callers watch it, and calls updated for each
// notifications/resources/updated of uri until unsubscribe; the last
// unsubscribe unsubscribes upstream. The subscriptions outlive the server's
// session: when Run connects again (the server restarted, the connection
// dropped), every URI still watched is subscribed again on the new session,
// and its watchers are told it may have changed meanwhile.
func (t *Transport) SubscribeResource(ctx context.Context, entry plexus.Entry, uri string, updated func()) (func(), error) {
	c, perr := t.client(entry)
	if perr != nil {
		return nil, perr
	}
	var rt route
	if err := json.Unmarshal(entry.Route, &rt); err != nil {
		return nil, plexus.Errorf(plexus.CodeTransportError, "the entry has no valid mcp route")
	}
	if rt.Primitive != "resource" && rt.Primitive != "resourceTemplate" || rt.Primitive == "resource" && rt.URI != uri {
		return nil, plexus.Errorf(plexus.CodeInvalidRequest, "%s is not the resource %s", entry.ID, uri)
	}
	return c.watch.add(ctx, c, uri, updated, entry.ID)
}

// watchers are a client's resource subscriptions, across its sessions: the
// callers watching each URI. seq is held across an upstream (un)subscribe
// and while a new session renews them, so that none of these cross for a
// URI and none is made on a session that is going away; mu only while
// byURI is read or changed, so that an update arriving meanwhile is never
// held up.
type watchers struct {
	seq   sync.Mutex
	mu    sync.Mutex
	byURI map[string]map[*watcher]struct{}
}

type watcher struct{ updated func() }

// subscribeTimeout bounds an upstream resources/subscribe.
const subscribeTimeout = 10 * time.Second

// add makes wt a watcher of uri, subscribing upstream when it is the first.
// The session is read under seq: a session published later renews what
// add put in byURI (renew), and one unpublished before is not used.
func (w *watchers) add(ctx context.Context, c *Client, uri string, updated func(), id string) (func(), error) {
	w.seq.Lock()
	defer w.seq.Unlock()
	s, why := c.current()
	if s == nil {
		return nil, plexus.Errorf(plexus.CodeSourceUnavailable, "the MCP server %s is not connected: %s", c.name, why)
	}
	if !subscribable(s) {
		return nil, plexus.Errorf(plexus.CodeInvalidRequest, "the MCP server %s takes no resource subscriptions", c.name)
	}
	if w.count(uri) == 0 {
		// Bounded: ctx may live as long as a host's listen stream, and a
		// server that never answers must not hold seq (nor the host) on.
		sctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
		err := s.cs.Subscribe(sctx, &mcp.SubscribeParams{URI: uri})
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded) {
			return nil, plexus.WrapError(plexus.CodeTransportError, err,
				fmt.Sprintf("the MCP server %s did not answer resources/subscribe for %s within %s", c.name, id, subscribeTimeout))
		}
		if err != nil {
			return nil, c.callError(ctx, err, "resources/subscribe", id)
		}
	}
	wt := &watcher{updated: updated}
	w.mu.Lock()
	if w.byURI == nil {
		w.byURI = map[string]map[*watcher]struct{}{}
	}
	if w.byURI[uri] == nil {
		w.byURI[uri] = map[*watcher]struct{}{}
	}
	w.byURI[uri][wt] = struct{}{}
	w.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { w.remove(c, uri, wt) }) }, nil
}

func subscribable(s *session) bool { return s.caps.Resources != nil && s.caps.Resources.Subscribe }

func (w *watchers) count(uri string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byURI[uri])
}

// remove drops wt, unsubscribing uri on the live session when it was the
// last watcher (none is needed when there is no session: the next one
// renews only what is still watched).
func (w *watchers) remove(c *Client, uri string, wt *watcher) {
	w.seq.Lock()
	defer w.seq.Unlock()
	w.mu.Lock()
	delete(w.byURI[uri], wt)
	left := len(w.byURI[uri])
	if left == 0 {
		delete(w.byURI, uri)
	}
	w.mu.Unlock()
	s, _ := c.current()
	if left > 0 || s == nil || !subscribable(s) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if err := s.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		c.log.Debug("resources/unsubscribe failed", "source", c.source, "err", c.red.err(err))
	}
}

// renew subscribes every watched URI again on s, a session Run has just
// published after another was lost: the server forgot the old session's
// subscriptions with it. Each URI renewed is then reported updated, since
// a change while the server was away was never announced. A URI the server
// refuses now stays watched (a later session may take it) and is logged.
func (w *watchers) renew(ctx context.Context, c *Client, s *session) {
	w.seq.Lock()
	w.mu.Lock()
	uris := make([]string, 0, len(w.byURI))
	for uri := range w.byURI {
		uris = append(uris, uri)
	}
	w.mu.Unlock()
	var renewed []string
	switch {
	case len(uris) == 0:
	case !subscribable(s):
		c.log.Warn("mcp: the server takes no resource subscriptions since it reconnected; they lapse", "watched", len(uris))
	default:
		// One bound for them all: Run waits for this before it serves.
		sctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		for _, uri := range uris {
			if err := s.cs.Subscribe(sctx, &mcp.SubscribeParams{URI: uri}); err != nil {
				c.log.Warn("mcp: a resource subscription was not renewed", "err", c.red.err(err))
				continue
			}
			renewed = append(renewed, uri)
		}
	}
	w.seq.Unlock()
	// Outside seq: a watcher may unsubscribe from its callback.
	for _, uri := range renewed {
		w.updated(uri)
	}
}

// updated calls the watchers of uri.
func (w *watchers) updated(uri string) {
	w.mu.Lock()
	var fs []func()
	for wt := range w.byURI[uri] {
		fs = append(fs, wt.updated)
	}
	w.mu.Unlock()
	for _, f := range fs {
		f()
	}
}
