package client

import (
	"context"
	"slices"
	"time"

	"github.com/plexus-gw/plexus"
)

// This file waits, after the owner changed a config file, for the running
// gateway to show what it made of it.

// WaitSource asks the gateway's status every interval for source id until
// it is healthy with entries, needs the owner to sign in (waiting longer
// would change nothing), or until deadline. It returns the last status
// of id it saw (a zero ID when never listed); an error of a request
// (ErrUnreachable when the gateway stopped) or ctx's as it is.
func (a *Admin) WaitSource(ctx context.Context, id string, deadline time.Time, every time.Duration) (plexus.SourceStatus, error) {
	var last plexus.SourceStatus
	for {
		st, err := a.Status(ctx)
		if err != nil {
			return last, err
		}
		if i := slices.IndexFunc(st.Sources, func(s plexus.SourceStatus) bool { return s.ID == id }); i >= 0 {
			last = st.Sources[i]
			if SourceUp(last) || last.Health.NeedsSignIn {
				return last, nil
			}
		}
		if time.Now().After(deadline) {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(every):
		}
	}
}

// SourceUp reports whether s is healthy and lists entries.
func SourceUp(s plexus.SourceStatus) bool {
	return s.Health.Status == plexus.HealthOK && s.Entries > 0
}

// WaitProvider asks the gateway every interval for provider id until it is
// connected with tools, has exited, or deadline passed, and returns its
// last status (a zero one when the gateway does not know id).
func (a *Admin) WaitProvider(ctx context.Context, id string, deadline time.Time, every time.Duration) (plexus.ProviderStatus, error) {
	var st plexus.ProviderStatus
	for {
		list, err := a.Providers(ctx)
		if err != nil {
			return st, err
		}
		for _, s := range list {
			if s.ID == id {
				st = s
			}
		}
		if ProviderUp(st) || st.State == plexus.ProviderExited || time.Now().After(deadline) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(every):
		}
	}
}

// ProviderUp reports whether st is connected and registered its tools.
func ProviderUp(st plexus.ProviderStatus) bool {
	return st.State == plexus.ProviderConnected && len(st.Tools) > 0
}
