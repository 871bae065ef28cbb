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

// SourcesResponse is the body of GET /console/api/sources.
type SourcesResponse struct {
	Sources []plexus.SourceStatus `json:"sources"`
}

func (c *Console) handleSources(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	st, err := c.opts.Status.Status(r.Context(), o.creds)
	if err != nil {
		writeError(w, nethttp.StatusBadGateway, "the gateway did not say its status: "+err.Error())
		return
	}
	out := SourcesResponse{Sources: st.Sources}
	if out.Sources == nil {
		out.Sources = []plexus.SourceStatus{}
	}
	writeJSON(w, nethttp.StatusOK, out)
}
