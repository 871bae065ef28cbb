// Package skill is the transport of kind:"skill" entries (extension spec
// §4, §6): not a wire at all. A skill's body is usage knowledge delivered
// in the manifest as context; there is nothing to call, so every dispatch
// is refused with transport_error. (A skill cannot be granted either, so
// the pipeline normally refuses the call before it gets here.)
package skill

import (
	"context"

	"github.com/plexus-gw/plexus"
)

// Transport refuses every call. It holds no state.
type Transport struct{}

var _ plexus.Transport = Transport{}

// Kind is skill.
func (Transport) Kind() plexus.TransportKind { return plexus.TransportSkill }

// Dispatch refuses: a skill is read, not invoked.
func (Transport) Dispatch(_ context.Context, entry plexus.Entry, _ map[string]any, _ plexus.DispatchContext) plexus.TransportResult {
	return plexus.TransportResult{Error: plexus.Errorf(plexus.CodeTransportError,
		"%s is a skill: its usage text is in the manifest (GET /manifest, the entry's body); it is read as context, never invoked", entry.ID)}
}
