package console

import (
	"context"
	nethttp "net/http"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// Status is what the Sources page asks of the gateway: its status, with
// each source's health and the entries it holds back. *gateway.Gateway
// implements it.
type Status interface {
	Status(ctx context.Context, c gateway.Credentials) (plexus.StatusResponse, error)
}

// Providers lists the ipc tool providers of providers.json with their
// live state (ipchost's supervisor implements it). Safe for concurrent use.
type Providers interface {
	Providers(ctx context.Context) ([]plexus.ProviderStatus, error)
}

// SourcesResponse is the body of GET /console/api/sources: every source's
// health, and each tool provider's process (state, restarts, last exit).
type SourcesResponse struct {
	Sources   []plexus.SourceStatus   `json:"sources"`
	Providers []plexus.ProviderStatus `json:"providers"`
}

func (c *Console) handleSources(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	st, err := c.opts.Status.Status(r.Context(), o.creds)
	if err != nil {
		writeError(w, nethttp.StatusBadGateway, "the gateway did not say its status: "+err.Error())
		return
	}
	out := SourcesResponse{Sources: st.Sources, Providers: []plexus.ProviderStatus{}}
	if out.Sources == nil {
		out.Sources = []plexus.SourceStatus{}
	}
	if c.opts.Providers != nil {
		ps, err := c.opts.Providers.Providers(r.Context())
		if err != nil {
			writeError(w, nethttp.StatusBadGateway, "the tool providers could not be listed: "+err.Error())
			return
		}
		out.Providers = append(out.Providers, ps...)
	}
	writeJSON(w, nethttp.StatusOK, out)
}
