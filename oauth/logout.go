package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"
)

// Logout signs out of a server: it ends a running sign-in, revokes the
// refresh and access tokens at the authorization server when it offers
// revocation (RFC 7009), and deletes the stored sign-in. It works for a
// server no longer configured (mcp remove) from what was stored. When
// revocation fails the tokens are deleted all the same and the error says
// so.
func (m *Manager) Logout(ctx context.Context, server string) error {
	s := m.source(server)
	rec, cfg, err := m.logoutRecord(s, server)
	if err != nil {
		m.opts.Logger.Warn("oauth: the stored sign-in is unreadable; deleting it unrevoked", "server", server, "err", err)
	}
	revoked, revokeErr := 0, error(nil)
	if rec != nil && rec.RevocationURL != "" {
		revoked, revokeErr = m.revoke(ctx, rec, cfg)
	}
	if err := removeRecord(m.opts.Store, server); err != nil {
		return err
	}
	if s != nil {
		s.signedOut()
	}
	payload := map[string]any{"revoked": revoked, "revocation_offered": rec != nil && rec.RevocationURL != ""}
	if revokeErr != nil {
		payload["error"] = revokeErr.Error()
	}
	m.journal(ctx, "oauth.signout", server, payload)
	if revokeErr != nil {
		return fmt.Errorf("signed out of %s, but revocation at the authorization server failed (the tokens may stay valid until they expire): %w", server, revokeErr)
	}
	return nil
}

// logoutRecord is the sign-in to revoke: the source's (a client-credentials
// token lives only there), else the stored one.
func (m *Manager) logoutRecord(s *source, server string) (*record, Config, error) {
	if s == nil {
		rec, err := loadRecord(m.opts.Store, server)
		return rec, Config{}, err
	}
	// A login that exchanged its code just now may be storing its tokens:
	// it is waited for, so that what is revoked and deleted is all there is.
	s.cancelLogin()
	s.waitLogin()
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	rec, err := s.record()
	return rec, s.cfg, err
}

// signedOut forgets the sign-in. A client-credentials source stays signed
// out (it would sign itself in again at the next call) until a Login.
func (s *source) signedOut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded, s.rec, s.forced, s.widen, s.notified, s.shown = true, nil, "", nil, false, nil
	s.granted, s.issuer = nil, ""
	s.needs, s.reason, s.dead = false, "", false
	if s.cfg.Grant == GrantClientCredentials {
		s.needs, s.reason, s.dead, s.notified = true, "signed out", true, true
	}
}

// revoke revokes the refresh token, then the access token (RFC 7009 §2.1:
// revoking a refresh token may take its access tokens with it, but need
// not).
func (m *Manager) revoke(ctx context.Context, rec *record, cfg Config) (int, error) {
	if err := checkHTTPS(rec.RevocationURL); err != nil {
		return 0, fmt.Errorf("revocation endpoint: %w", err)
	}
	n := 0
	var errs []error
	for _, t := range []struct{ value, hint string }{
		{refreshToken(rec), "refresh_token"}, {accessToken(rec), "access_token"},
	} {
		if t.value == "" {
			continue
		}
		if err := m.revokeOne(ctx, rec, cfg, t.value, t.hint); err != nil {
			errs = append(errs, fmt.Errorf("revoke the %s: %w", strings.ReplaceAll(t.hint, "_", " "), err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func (m *Manager) revokeOne(ctx context.Context, rec *record, cfg Config, token, hint string) error {
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	basic := false
	switch {
	case cfg.PrivateKey != "":
		a, err := m.assertion(rec.ClientID, cfg.PrivateKey, rec.Issuer)
		if err != nil {
			return err
		}
		form.Set("client_id", rec.ClientID)
		form.Set("client_assertion_type", jwtBearer)
		form.Set("client_assertion", a)
	case rec.ClientSecret != "" && rec.AuthStyle == oauth2.AuthStyleInParams:
		form.Set("client_id", rec.ClientID)
		form.Set("client_secret", rec.ClientSecret)
	case rec.ClientSecret != "":
		basic = true
	default:
		form.Set("client_id", rec.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rec.RevocationURL, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic {
		req.SetBasicAuth(url.QueryEscape(rec.ClientID), url.QueryEscape(rec.ClientSecret))
	}
	resp, err := m.client(rec.ServerURL, cfg.AuthServerMetadataURL).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &TokenError{Status: resp.StatusCode}
	}
	return nil
}

func refreshToken(rec *record) string {
	if rec.Token == nil {
		return ""
	}
	return rec.Token.RefreshToken
}

func accessToken(rec *record) string {
	if rec.Token == nil {
		return ""
	}
	return rec.Token.AccessToken
}
