package plexus

import (
	"context"
	"encoding/json"
)

// Completer is what a transport offers when the server behind its entries
// can suggest values for an entry's arguments (MCP's completion/complete).
// The gateway finds it on the entry's transport by type assertion; the
// core never looks inside params or the answer.
type Completer interface {
	// Complete asks entry's server to complete params (the completion's
	// argument and context, as JSON) for entry, and answers the server's
	// result as JSON. An error is a *Error saying why there is none.
	Complete(ctx context.Context, entry Entry, params json.RawMessage) (json.RawMessage, error)
}

// ResourceSubscriber is what a transport offers when the server behind a
// resource entry can tell when the resource at a URI changes (MCP's
// resources/subscribe).
type ResourceSubscriber interface {
	// SubscribeResource calls updated each time the server says uri (a
	// URI of entry) changed, until unsubscribe is called. updated must not
	// block for long. An error is a *Error saying why there is none.
	SubscribeResource(ctx context.Context, entry Entry, uri string, updated func()) (unsubscribe func(), err error)
}
