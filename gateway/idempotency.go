package gateway

import (
	"container/list"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
)

// IdempotencyWindow is how long an (agent, id, idempotencyKey) tuple
// suppresses a re-dispatch.
const IdempotencyWindow = 24 * time.Hour

// idempotencyCapacity bounds memory: the oldest keys are forgotten first.
const idempotencyCapacity = 10000

// idempotency remembers the first response of side-effecting calls made with
// an idempotencyKey. It is in memory on purpose: responses hold call output,
// which must never reach the journal, so a restart forgets the responses
// (written down in docs/choices.md). It does not forget the calls: their
// invoke.started rows keep a retry from running again (started.go).
type idempotency struct {
	mu    sync.Mutex // guards all fields
	order *list.List // of *idemEntry, oldest first
	byKey map[string]*list.Element
}

type idemEntry struct {
	key  string
	at   time.Time
	resp plexus.InvokeResponse
}

func newIdempotency() *idempotency {
	return &idempotency{order: list.New(), byKey: make(map[string]*list.Element)}
}

func (m *idempotency) get(key string, now time.Time) (plexus.InvokeResponse, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.byKey[key]
	if !ok {
		return plexus.InvokeResponse{}, false
	}
	e := el.Value.(*idemEntry)
	if now.Sub(e.at) > IdempotencyWindow {
		m.order.Remove(el)
		delete(m.byKey, key)
		return plexus.InvokeResponse{}, false
	}
	return e.resp, true
}

func (m *idempotency) put(key string, resp plexus.InvokeResponse, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byKey[key]; ok {
		return // the first response wins
	}
	m.byKey[key] = m.order.PushBack(&idemEntry{key: key, at: now, resp: resp})
	for m.order.Len() > idempotencyCapacity {
		old := m.order.Front()
		m.order.Remove(old)
		delete(m.byKey, old.Value.(*idemEntry).key)
	}
}
