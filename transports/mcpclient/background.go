package mcpclient

import (
	"context"
	"sync"
)

// background owns the goroutines a connection starts that outlive the
// call that starts them (the notifications/cancelled of a call whose
// caller left, passthrough.go; the error answering a request over the
// maximum size, oversized.go): each runs under a context that ends at
// stop, and wait waits for them, so none outlives the connection's Close.
// Its zero value is ready; safe for concurrent use.
type background struct {
	mu      sync.Mutex // guards ctx, cancel, stopped and wg.Add against stop's Wait
	ctx     context.Context
	cancel  context.CancelFunc
	stopped bool
	wg      sync.WaitGroup
}

// run runs f on a goroutine of its own under b's context, unless b was
// stopped; it reports whether f runs.
func (b *background) run(f func(context.Context)) bool {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return false
	}
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithCancel(context.Background())
	}
	ctx := b.ctx
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		f(ctx)
	}()
	return true
}

// stop ends the context of every goroutine b runs and lets none start.
func (b *background) stop() {
	b.mu.Lock()
	b.stopped = true
	if b.cancel != nil {
		b.cancel()
	}
	b.mu.Unlock()
}

// wait waits for b's goroutines, after stop: each must return once its
// context ended.
func (b *background) wait() { b.wg.Wait() }
