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
	"time"

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

func keyEpoch(tx plexus.StateTx) (int64, error) {
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
	newHash := g.d.Hasher.Hash(key)
	var rot keyRotation
	var prevHash []byte
	err = g.update(ctx, true, func(tx plexus.StateTx) error {
		var err error
		if rot, err = endKeySessions(tx, now); err != nil {
			return err
		}
		if err := tx.Record(keyRotatedRow(rot, g.adminVia(c))); err != nil {
			return err
		}
		// Last, so that a failure to persist the key rolls everything back
		// and the old key stays in force.
		if g.d.SaveConnectionKey != nil {
			if err := g.d.SaveConnectionKey(key); err != nil {
				return fmt.Errorf("save connection-key: %w", err)
			}
		}
		prevHash = g.swapKeyHash(newHash)
		return nil
	})
	if err != nil {
		g.restoreKeyHash(prevHash, newHash)
		return plexus.KeyRotateResponse{}, plexus.AsError(err)
	}
	for _, ev := range rot.events {
		g.bus.publish(*ev)
	}
	g.bus.end(rot.sessions)
	return plexus.KeyRotateResponse{ConnectionKey: key, RevokedSessions: rot.sessions, RevokedJTIs: rot.jtis}, nil
}

// keyRotation is what rotating the connection-key ended, inside the
// transaction: the new epoch, the sessions opened under the old key and
// their tokens, with the token_revoked events to publish after commit.
type keyRotation struct {
	epoch    int64
	sessions []string
	jtis     []string
	events   []*plexus.Event
}

// endKeySessions moves the key epoch on and ends every admin and anon
// session of an older epoch with its live tokens, inside tx.
func endKeySessions(tx plexus.StateTx, now time.Time) (keyRotation, error) {
	out := keyRotation{sessions: []string{}, jtis: []string{}}
	epoch, err := keyEpoch(tx)
	if err != nil {
		return keyRotation{}, err
	}
	out.epoch = epoch + 1
	if err := tx.SetMeta(metaKeyEpoch, strconv.FormatInt(out.epoch, 10)); err != nil {
		return keyRotation{}, err
	}
	for _, kind := range []plexus.SessionKind{plexus.SessionAdmin, plexus.SessionAnon} {
		sids, err := tx.RevokeSessions(kind, "", out.epoch, now)
		if err != nil {
			return keyRotation{}, err
		}
		out.sessions = append(out.sessions, sids...)
		for _, sid := range sids {
			toks, err := tx.LiveTokens("", "", sid, now)
			if err != nil {
				return keyRotation{}, err
			}
			jtis, events, err := revokeTokens(tx, toks, "connection-key rotated", now)
			if err != nil {
				return keyRotation{}, err
			}
			out.jtis = append(out.jtis, jtis...)
			out.events = append(out.events, events...)
		}
	}
	return out, nil
}

// keyRotatedRow is the key.rotated row of a rotation.
func keyRotatedRow(rot keyRotation, via string) *plexus.Activity {
	return &plexus.Activity{Actor: plexus.ActorHuman, ActionType: "key.rotated", Target: "connection-key",
		Payload: map[string]any{"epoch": rot.epoch, "sessions": len(rot.sessions), "revokedJtis": rot.jtis, "via": via}}
}

// swapKeyHash puts the new key in force and returns the hash it replaced
// (nil when the key did not change). It runs inside the rotation's
// transaction, under the writer lock: an admin handshake checks the key
// again inside its own transaction, so it either committed before the
// rotation (and its session was ended) or sees the new key.
func (g *Gateway) swapKeyHash(newHash []byte) []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	var prev []byte
	if !bytes.Equal(g.keyHash, newHash) {
		prev = g.keyHash
	}
	g.keyHash = newHash
	return prev
}

// restoreKeyHash puts the old key back in force after a rotation whose
// commit failed.
func (g *Gateway) restoreKeyHash(prev, newHash []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if prev != nil && bytes.Equal(g.keyHash, newHash) {
		g.keyHash = prev
	}
}
