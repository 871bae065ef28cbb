package client

import (
	"context"
	"net/http"

	"github.com/plexus-gw/plexus"
)

// Providers lists the ipc tool providers the running gateway declares, with
// their live state (GET /admin/api/providers).
func (a *Admin) Providers(ctx context.Context) ([]plexus.ProviderStatus, error) {
	var resp plexus.ProvidersResponse
	err := a.do(ctx, http.MethodGet, "/admin/api/providers", nil, &resp)
	return resp.Providers, err
}

// ReloadProviders asks the running gateway to make its providers match
// PLEXUS_HOME/providers.json (POST /admin/api/providers/reload).
func (a *Admin) ReloadProviders(ctx context.Context) (plexus.ProvidersReloadResponse, error) {
	var resp plexus.ProvidersReloadResponse
	err := a.do(ctx, http.MethodPost, "/admin/api/providers/reload", struct{}{}, &resp)
	return resp, err
}
