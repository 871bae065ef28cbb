package gateway

// The owner's connection-key: checking it on every owner-plane request,
// and rotating it.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// AdminCheck verifies the connection-key, presented as Authorization: Bearer
// plx_live_… or X-Plexus-Connection-Key. Failures are throttled, by the key
// presented, and journaled.
func (g *Gateway) AdminCheck(ctx context.Context, c Credentials) error {
	key := c.ConnectionKey
	if key == "" && strings.HasPrefix(c.Bearer, plexus.PrefixConnectionKey) {
		key = c.Bearer
	}
	if key == "" {
		return plexus.Errorf(plexus.CodeUnauthorized, "the admin API needs the connection-key: Authorization: Bearer plx_live_…")
	}
	bucket := g.credentialBucket("key", plexus.PrefixConnectionKey, key)
	if err := g.throttled(bucket); err != nil {
		return err
	}
	if !g.checkKey(key) {
		g.credentialFailed(ctx, bucket, c.Remote, "admin", "wrong connection-key")
		return plexus.Errorf(plexus.CodeUnauthorized, "wrong connection-key")
	}
	g.credentialOK(bucket)
	return nil
}

func (g *Gateway) adminVia(c Credentials) string {
	if c.Via != "" {
		return c.Via
	}
	return plexus.ViaAdminAPI
}

func (g *Gateway) keyEpoch(tx plexus.StateTx) (int64, error) {
	v, err := tx.Meta(metaKeyEpoch)
	if errors.Is(err, plexus.ErrNotFound) {
		return 1, nil
	} else if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// RotateKey replaces the connection-key. Every admin- and anon-session
// bootstrapped under the old key ends and their tokens are revoked; agent
// sessions, bootstrapped under PATs, are untouched.
func (g *Gateway) RotateKey(ctx context.Context, c Credentials) (plexus.KeyRotateResponse, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.KeyRotateResponse{}, err
	}
	key, err := auth.NewConnectionKey()
	if err != nil {
		return plexus.KeyRotateResponse{}, plexus.WrapError(plexus.CodeInternalError, err, "could not generate a key")
	}
	now := g.now()
	out := plexus.KeyRotateResponse{ConnectionKey: key}
	var events []*plexus.Event
	newHash := g.d.Hasher.Hash(key)
	var prevHash []byte
	err = g.update(ctx, true, func(tx plexus.StateTx) error {
		events = nil
		out.RevokedSessions, out.RevokedJTIs = []string{}, []string{}
		epoch, err := g.keyEpoch(tx)
		if err != nil {
			return err
		}
		epoch++
		if err := tx.SetMeta(metaKeyEpoch, strconv.FormatInt(epoch, 10)); err != nil {
			return err
		}
		for _, kind := range []plexus.SessionKind{plexus.SessionAdmin, plexus.SessionAnon} {
			sids, err := tx.RevokeSessions(kind, "", epoch, now)
			if err != nil {
				return err
			}
			out.RevokedSessions = append(out.RevokedSessions, sids...)
			for _, sid := range sids {
				toks, err := tx.LiveTokens("", "", sid, now)
				if err != nil {
					return err
				}
				for i := range toks {
					if ok, err := tx.RevokeToken(toks[i].JTI, "connection-key rotated", now); err != nil {
						return err
					} else if ok {
						out.RevokedJTIs = append(out.RevokedJTIs, toks[i].JTI)
						ev := revokedEvent(&toks[i], "connection-key rotated")
						if err := tx.Publish(ev); err != nil {
							return err
						}
						events = append(events, ev)
					}
				}
			}
		}
		if err := tx.Record(&plexus.Activity{Actor: plexus.ActorHuman, ActionType: "key.rotated", Target: "connection-key",
			Payload: map[string]any{"epoch": epoch, "sessions": len(out.RevokedSessions), "revokedJtis": out.RevokedJTIs,
				"via": g.adminVia(c)}}); err != nil {
			return err
		}
		// Last, so that a failure to persist the key rolls everything back
		// and the old key stays in force.
		if g.d.SaveConnectionKey != nil {
			if err := g.d.SaveConnectionKey(key); err != nil {
				return fmt.Errorf("save connection-key: %w", err)
			}
		}
		// The key changes in memory inside this transaction, under the
		// writer lock: an admin handshake checks the key again inside its
		// own transaction, so it either committed before this one (and its
		// session was ended above) or sees the new key.
		g.mu.Lock()
		if !bytes.Equal(g.keyHash, newHash) {
			prevHash = g.keyHash
		}
		g.keyHash = newHash
		g.mu.Unlock()
		return nil
	})
	if err != nil {
		g.mu.Lock()
		if prevHash != nil && bytes.Equal(g.keyHash, newHash) {
			g.keyHash = prevHash // the commit failed: the old key stays in force
		}
		g.mu.Unlock()
		return plexus.KeyRotateResponse{}, plexus.AsError(err)
	}
	for _, ev := range events {
		g.bus.publish(*ev)
	}
	g.bus.end(out.RevokedSessions)
	return out, nil
}
