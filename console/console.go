// Package console is the owner's web console at /console/ on the daemon's
// loopback listener: one page for what waits on the owner, kept live by
// server-sent events. Its assets (plain HTML, CSS and JavaScript modules,
// no framework, no build step) are embedded.
//
// It must never be opened by anything but the owner: a session starts only
// from a one-time sign-in link the owner's connection-key asked for, or from
// the connection-key pasted into its sign-in page, and agents' credentials
// are never read. Every state-changing request is checked for its Origin
// (twice: its own check and net/http's CrossOriginProtection) and a CSRF
// token, and every page carries a Content-Security-Policy with no inline
// script or style. It decides nothing itself: an approval or a denial is
// the same file move `plexus approve` makes (inbox.OwnerMove), stamped
// `via: console`, which the reconciler turns into the gateway's one
// decision. The Host guard of package http runs before any of it.
package console

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	nethttp "net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// Prefix is where the console is mounted.
const Prefix = "/console/"

// Defaults of [Options].
const (
	// DefaultLinkTTL is how long a sign-in link works (once).
	DefaultLinkTTL = 2 * time.Minute
	// DefaultSessionTTL is how long a console session lasts after sign-in,
	// however active.
	DefaultSessionTTL = 12 * time.Hour
)

//go:embed assets
var assets embed.FS

// Owner is what the console asks of the gateway, with the owner's
// credentials. *gateway.Gateway implements it; every method may be called
// concurrently.
type Owner interface {
	AdminCheck(ctx context.Context, c gateway.Credentials) error
	AdminPending(ctx context.Context, c gateway.Credentials) (plexus.PendingListResponse, error)
	AdminShowPending(ctx context.Context, c gateway.Credentials, id string) (plexus.Pending, error)
}

// Tokens finds the token an approval minted (the journal implements it).
type Tokens interface {
	MintedOnApproval(ctx context.Context, traceID, pendingID string) (string, error)
}

// Journal records the console's own rows (a sign-in, a sign-out);
// *journal.DB implements it.
type Journal interface {
	Update(ctx context.Context, durable bool, fn func(tx plexus.StateTx) error) error
}

// Options configure a [Console]. Home, Owner, Grants, Agents, Status, Key
// and Decider are required.
type Options struct {
	// Home is PLEXUS_HOME: the decision folders are read and moved there.
	Home string
	// Owner, Grants, Agents and Status are the gateway, Tokens the
	// journal.
	Owner  Owner
	Grants Grants
	Agents Agents
	Status Status
	Tokens Tokens
	// Activity reads the journal for the Journal page; nil serves none.
	Activity Activity
	// Journal records sign-ins and sign-outs; nil records none.
	Journal Journal
	// JournalFailed reports a row Journal could not write (the gateway's:
	// logged once, counted for plexus status); nil logs it.
	JournalFailed func(what string, err error)
	// PeerUID finds the OS user of a request's connection (ok false when
	// it cannot tell); a request from another user than OwnerUID, or
	// whose user cannot be told, is refused, whatever it carries. It is a
	// layer under the page secret, for where the platform can tell (the
	// daemon sets it on Linux only). Nil checks nothing.
	PeerUID  func(r *nethttp.Request) (uid int, ok bool)
	OwnerUID int
	// Providers are the ipc tool providers; nil shows none.
	Providers Providers
	// Changes streams the gateway's broadcast events (a source's status,
	// the catalog changing), each of which wakes the open pages, as a
	// decision folder's change does ([Console.Changed]); nil: only those.
	Changes func(ctx context.Context) <-chan plexus.Event
	// Key returns the connection-key in force. A session remembers a hash
	// of the key it was opened under, so rotating the key signs every
	// console out.
	Key func() (string, error)
	// Decider names who decides from the console (the daemon's owner).
	Decider    func() string
	Clock      func() time.Time
	Logger     *slog.Logger
	LinkTTL    time.Duration
	SessionTTL time.Duration
}

// Console serves /console/. Create it with [New]; its goroutines are the
// requests' own, and [Console.Changed] never blocks.
type Console struct {
	opts   Options
	log    *slog.Logger
	mux    *nethttp.ServeMux
	pages  *template.Template
	static nethttp.Handler
	auth   *authStore
	live   *broadcaster
}

// New returns the console; mount [Console.Handler] at [Prefix].
func New(o Options) *Console {
	if o.Owner == nil || o.Grants == nil || o.Agents == nil || o.Status == nil || o.Key == nil || o.Decider == nil || o.Home == "" {
		panic("console.New: Home, Owner, Grants, Agents, Status, Key and Decider are required")
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LinkTTL <= 0 {
		o.LinkTTL = DefaultLinkTTL
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	c := &Console{opts: o, log: o.Logger, mux: nethttp.NewServeMux(),
		pages:  template.Must(template.ParseFS(assets, "assets/*.html")),
		static: noListing(nethttp.StripPrefix(Prefix+"static/", nethttp.FileServerFS(static))),
		auth:   newAuthStore(o.Clock, o.LinkTTL, o.SessionTTL), live: newBroadcaster()}
	c.routes()
	return c
}

// Handler is the console's handler, for the daemon's mux at [Prefix].
func (c *Console) Handler() nethttp.Handler { return securityHeaders(c.ownerOnly(c.mux)) }

// ownerOnly refuses a request that does not come from a loopback address
// (whatever network.json allows the rest of the gateway), and one whose
// connection belongs to another OS user than the owner's, or to a user
// that cannot be told (Options.PeerUID).
func (c *Console) ownerOnly(next nethttp.Handler) nethttp.Handler {
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err != nil || !ap.Addr().Unmap().IsLoopback() {
			writeError(w, nethttp.StatusForbidden, "the console answers only this machine's loopback")
			return
		}
		if c.opts.PeerUID != nil {
			if uid, ok := c.opts.PeerUID(r); !ok || uid != c.opts.OwnerUID {
				writeError(w, nethttp.StatusForbidden, "the console answers only the owner's own OS user")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// journal records a row of the console's own (actor human); a failure is
// reported as every journal failure is (JournalFailed: logged once and
// counted for plexus status), and does not undo the sign-in or sign-out.
func (c *Console) journal(ctx context.Context, action string, payload map[string]any) {
	if c.opts.Journal == nil {
		return
	}
	err := c.opts.Journal.Update(ctx, true, func(tx plexus.StateTx) error {
		return tx.Record(&plexus.Activity{Actor: plexus.ActorHuman, ActionType: action, Target: "console", Payload: payload})
	})
	switch {
	case err == nil:
	case c.opts.JournalFailed != nil:
		c.opts.JournalFailed(action, err)
	default:
		c.log.Warn("console: journal "+action, "err", err)
	}
}

// Changed tells every open console page that what it shows may have
// changed (a decision folder changed, a grant ended). It never blocks.
func (c *Console) Changed() { c.live.notify() }

func (c *Console) routes() {
	m := c.mux
	m.HandleFunc("POST "+Prefix+"link", c.handleLink)
	m.HandleFunc("GET "+Prefix+"signin", c.handleSignInPage)
	m.Handle("POST "+Prefix+"signin", c.mutating(nethttp.HandlerFunc(c.handleSignIn)))
	m.Handle("POST "+Prefix+"api/signout", c.mutating(c.signedIn(c.handleSignOut)))
	m.Handle("GET "+Prefix+"api/session", c.signedIn(c.handleSession))
	m.Handle("GET "+Prefix+"static/", c.static)
	m.Handle("GET "+Prefix+"{$}", c.signedInPage(c.handleApp))
	m.Handle("GET "+Prefix+"api/pending", c.signedIn(c.handlePending))
	m.Handle("GET "+Prefix+"api/events", c.signedIn(c.handleEvents))
	m.Handle("POST "+Prefix+"api/pending/{id}/{action}", c.mutating(c.signedIn(c.handleDecide)))
	m.Handle("GET "+Prefix+"api/grants", c.signedIn(c.handleGrants))
	m.Handle("POST "+Prefix+"api/grants/revoke", c.mutating(c.signedIn(c.handleRevoke)))
	m.Handle("GET "+Prefix+"api/journal", c.signedIn(c.handleJournal))
	m.Handle("GET "+Prefix+"api/agents", c.signedIn(c.handleAgents))
	m.Handle("GET "+Prefix+"api/sources", c.signedIn(c.handleSources))
	m.Handle("POST "+Prefix+"api/agents/revoke", c.mutating(c.signedIn(c.handleRevokeAgent)))
	m.HandleFunc(Prefix, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		writeError(w, nethttp.StatusNotFound, "no such page in the console")
	})
}

// securityHeaders sets, on every answer, a Content-Security-Policy that
// lets the page run only its own script and style files and talk only to
// its own origin, and keeps it out of frames and caches.
func securityHeaders(next nethttp.Handler) nethttp.Handler {
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// Not no-referrer: under it a browser sends "Origin: null" on a form
		// post, which the Origin checks refuse.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// noListing serves files only: a folder's listing says nothing the page
// needs.
func noListing(next nethttp.Handler) nethttp.Handler {
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			writeError(w, nethttp.StatusNotFound, "no such file in the console")
			return
		}
		next.ServeHTTP(w, r)
	})
}
