package daemon

import (
	"github.com/plexus-gw/plexus/gateway"
	plexushttp "github.com/plexus-gw/plexus/http"
)

// httpBackend hands the gateway to the HTTP edge as every handler group.
func httpBackend(g *gateway.Gateway) plexushttp.Backend {
	return plexushttp.Backend{Agents: g, Grants: g, Invoke: g, Events: g, Extensions: g,
		Owner: g, Admin: g, Decisions: g, Sources: g}
}
