package console

import (
	"context"
	nethttp "net/http"
	"sync"
	"time"
)

// heartbeat is the interval of the keep-alive comment on a page's stream;
// a frame not taken within two of them ends the stream.
const heartbeat = 15 * time.Second

// broadcaster wakes every open page's stream. A page is told only that
// something changed, and fetches what it shows again: a wake-up that finds
// one already waiting is merged with it, so nothing is ever queued for a
// slow page. mu guards subs and done.
type broadcaster struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	done bool
}

func newBroadcaster() *broadcaster { return &broadcaster{subs: map[chan struct{}]struct{}{}} }

func (b *broadcaster) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already waiting
		}
	}
}

// subscribe returns a channel that receives a wake-up after each change
// and is closed when the console stops; nil when it has stopped.
func (b *broadcaster) subscribe() chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return nil
	}
	ch := make(chan struct{}, 1)
	b.subs[ch] = struct{}{}
	return ch
}

func (b *broadcaster) unsubscribe(ch chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[ch]; ok {
		delete(b.subs, ch)
		close(ch)
	}
}

// stop closes every stream's channel, and any later subscriber's at once.
func (b *broadcaster) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = true
	for ch := range b.subs {
		delete(b.subs, ch)
		close(ch)
	}
}

// Run wakes the open pages on each of the gateway's broadcast events
// (Options.Changes) until ctx ends, then ends every page's stream, so that
// the server's graceful shutdown does not wait on them.
func (c *Console) Run(ctx context.Context) error {
	defer c.live.stop()
	if c.opts.Changes == nil {
		<-ctx.Done()
		return nil
	}
	for ctx.Err() == nil {
		// The gateway drops a reader that falls behind; a page that missed
		// events only needs waking, so subscribe again and wake it.
		for range c.opts.Changes(ctx) {
			c.live.notify()
		}
		c.live.notify()
	}
	return nil
}

// handleEvents streams "changed" to the page: once at once, then after
// each change, until the page goes, the session ends or the console stops.
func (c *Console) handleEvents(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	ch := c.live.subscribe()
	if ch == nil {
		writeError(w, nethttp.StatusServiceUnavailable, "the console is stopping")
		return
	}
	defer c.live.unsubscribe(ch)
	rc := nethttp.NewResponseController(w)
	if rc.SetReadDeadline(time.Time{}) != nil || rc.SetWriteDeadline(time.Now().Add(2*heartbeat)) != nil {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(nethttp.StatusOK)
	frame := "retry: 1000\nevent: changed\ndata: {}\n\n"
	ping := time.NewTicker(heartbeat)
	defer ping.Stop()
	ends := time.NewTimer(o.sess.expires.Sub(c.opts.Clock()))
	defer ends.Stop()
	for {
		if rc.SetWriteDeadline(time.Now().Add(2*heartbeat)) != nil {
			return
		}
		if _, err := w.Write([]byte(frame)); err != nil || rc.Flush() != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-ends.C:
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
			frame = "event: changed\ndata: {}\n\n"
		case <-ping.C:
			frame = ": ping\n\n"
		}
		// A page signed out elsewhere, or whose key was rotated, is told
		// nothing more.
		key, err := c.opts.Key()
		if err != nil {
			return
		}
		if _, ok := c.auth.lookup(o.id, sum(key)); !ok {
			return
		}
	}
}
