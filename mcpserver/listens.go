package mcpserver

import (
	"net/http"
	"strconv"
	"sync"
)

// DefaultListensPerAgent is the default of [Options.ListensPerAgent]: the
// /events streams' cap per agent (gateway.DefaultStreamsPerAgent), since a
// subscriptions/listen stream is the MCP /events.
const DefaultListensPerAgent = 32

// listenSlots count the subscriptions/listen streams open per agent (by
// its PAT's hash, which is the agent's): each has an SDK server and a host
// of its own, and every refresh rebuilds every host's catalog, so one agent
// must not open them without end.
type listenSlots struct {
	mu   sync.Mutex
	open map[[32]byte]int
}

// take holds a slot of the agent behind l, or answers false when it holds
// limit already; release gives it back.
func (ls *listenSlots) take(l *link, limit int) (release func(), ok bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.open[l.patHash] >= limit {
		return nil, false
	}
	if ls.open == nil {
		ls.open = map[[32]byte]int{}
	}
	ls.open[l.patHash]++
	var once sync.Once
	return func() {
		once.Do(func() {
			ls.mu.Lock()
			defer ls.mu.Unlock()
			if ls.open[l.patHash]--; ls.open[l.patHash] <= 0 {
				delete(ls.open, l.patHash)
			}
		})
	}, true
}

// tooManyListens is the refusal of a listen stream over the cap.
func tooManyListens(limit int) *refusal {
	return &refusal{status: http.StatusTooManyRequests,
		msg: "rate_limited: this agent holds " + strconv.Itoa(limit) +
			" subscriptions/listen streams already (the cap per agent): end one before opening another"}
}
