package oauth

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// check refuses, before the owner is sent anywhere, a sign-in that does
// not match what the owner was shown: with an approved request, its issuer
// and resource; without one, for a client holding a secret or a key and
// no pinned authorization server, the issuer it signed in at before. A
// refusal files a new request showing what was found.
func (l *login) check(ctx context.Context, rec *record, ch []oauthex.Challenge) error {
	s, d := l.src, l.d
	var reason string
	switch a := l.approved; {
	case a != nil && a.Issuer != d.asm.Issuer:
		reason = fmt.Sprintf("the authorization server is %s, not %s as the approved request showed", d.asm.Issuer, orNone(a.Issuer))
	case a != nil && a.Resource != shown(d.resource):
		reason = fmt.Sprintf("the resource is %s, not %s as the approved request showed", shown(d.resource), a.Resource)
	case a == nil && s.cfg.AuthServerMetadataURL == "" && (s.cfg.ClientSecret != "" || s.cfg.PrivateKey != "") &&
		rec != nil && rec.Issuer != "" && rec.Issuer != d.asm.Issuer:
		reason = fmt.Sprintf("the authorization server changed from %s to %s", rec.Issuer, d.asm.Issuer)
	default:
		return nil
	}
	scopes := s.cfg.Scopes
	if len(scopes) == 0 {
		scopes = union(strings.Fields(challengeParam(ch, "scope")), nil)
	}
	if len(scopes) == 0 {
		scopes = d.scopesSupported
	}
	s.refile(ctx, reason, d, scopes)
	return fmt.Errorf("%s; a new sign-in request shows it: approve it in the inbox", reason)
}

// matches is the last check before the owner is sent to u, the SDK's
// authorization URL: the authorization endpoint discovered, the resource,
// and with an approved request no scope beyond those it showed (but
// offline_access, which only asks for a refresh token).
func (l *login) matches(u *url.URL) error {
	if !strings.HasPrefix(u.String(), l.d.asm.AuthorizationEndpoint) {
		return fmt.Errorf("the authorization URL is not at %s, the endpoint discovered", l.d.asm.AuthorizationEndpoint)
	}
	a := l.approved
	if a == nil {
		return nil
	}
	q := u.Query()
	if r := q.Get("resource"); shown(r) != a.Resource {
		return fmt.Errorf("the sign-in would be for %s, not %s as the approved request showed", shown(r), a.Resource)
	}
	for _, sc := range strings.Fields(q.Get("scope")) {
		if sc != "offline_access" && !slices.Contains(a.Scopes, sc) {
			return fmt.Errorf("the sign-in would ask for the scope %q, which the approved request did not show", sc)
		}
	}
	return nil
}

func orNone(issuer string) string {
	if issuer == "" {
		return "none (not discovered yet)"
	}
	return issuer
}

// shown is a URL as the owner is shown it and the journal keeps it:
// without user info, query and fragment, where keys sometimes ride.
func shown(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}
