package journal

import (
	"context"
	"errors"
	"sync"

	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/plexus-gw/plexus"
	"strings"
	"testing"
)

// TestAnchorMAC holds the anchor's MAC to its format (anchors written by
// earlier builds must still verify), computed between row hashes that share
// its HMAC state.
func TestAnchorMAC(t *testing.T) {
	c, err := newChainer(testKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []anchor{
		{KeyedAfter: 0, ID: 1, Hash: "ab", DurableID: 0},
		{KeyedAfter: 12, ID: 9_000_000_000, Hash: strings.Repeat("f", 64), DurableID: 8_999_999_999},
		{KeyedAfter: -1, ID: 0, Hash: "", DurableID: -5},
	} {
		c.rowHash("prev", []byte("row"))
		m := hmac.New(sha256.New, testKey)
		fmt.Fprintf(m, "plexus journal anchor v1\n%d\n%d\n%s\n%d\n", a.KeyedAfter, a.ID, a.Hash, a.DurableID)
		if got, want := c.anchorMAC(&a), hex.EncodeToString(m.Sum(nil)); got != want {
			t.Errorf("anchorMAC(%+v) = %s, want %s", a, got, want)
		}
	}
}

// TestAppendAnchorMatchesJSON: the anchor record written without
// encoding/json is what json.Marshal wrote before (anchors of earlier builds
// and of this one read alike), and decodes to the same anchor whatever its
// strings hold.
func TestAppendAnchorMatchesJSON(t *testing.T) {
	for _, a := range []anchor{
		{V: anchorVersion, KeyedAfter: 0, ID: 1, Hash: "ab", DurableID: 0, MAC: strings.Repeat("0", 64)},
		{V: anchorVersion, KeyedAfter: 12, ID: 9_000_000_000, Hash: strings.Repeat("f", 64), DurableID: 8_999_999_999, MAC: strings.Repeat("e", 64)},
		{V: 2, KeyedAfter: -1, ID: 0, Hash: "", DurableID: -5, MAC: ""},
	} {
		want, err := json.Marshal(&a)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendAnchor(nil, &a); string(got) != string(want) {
			t.Errorf("appendAnchor(%+v) = %s, want %s", a, got, want)
		}
	}
	odd := anchor{V: anchorVersion, ID: 3, Hash: "a\"b\n<é>\u2028", MAC: "\x00\xff"}
	var back anchor
	if err := json.Unmarshal(appendAnchor(nil, &odd), &back); err != nil {
		t.Fatalf("appendAnchor of %+v does not decode: %v", odd, err)
	}
	odd.MAC = "\x00\ufffd" // invalid UTF-8 decodes as the replacement character, as with encoding/json
	if back != odd {
		t.Errorf("appendAnchor round trip = %+v, want %+v", back, odd)
	}
}

// TestChainHeadAfterForeignAppend: a DB starts each transaction from the
// last row it committed, and another process appending in between (the CLI
// on the same journal) does not break the chain: the next row links to the
// foreign row, in a lone update, in a group-committed batch with a fn
// rolled back ahead of it, and in a durable update.
func TestChainHeadAfterForeignAppend(t *testing.T) {
	ctx := context.Background()
	td := mustOpen(t)
	cli := mustOpenAt(t, td.path, Options{AuditDir: td.audit, AnchorPath: td.anchor, Clock: td.clock.Now})
	record := func(db *DB, durable bool, typ string) {
		t.Helper()
		err := db.Update(ctx, durable, func(tx plexus.StateTx) error {
			return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: typ, Target: "x"})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	record(td.DB, false, "daemon.one")
	record(cli, false, "cli.one")
	record(td.DB, false, "daemon.two") // lone
	record(cli, true, "cli.two")
	record(cli, false, "cli.three")
	// A batch: a fn that records then fails, then one that records.
	var wg sync.WaitGroup
	failing := errors.New("refused")
	release := make(chan struct{})
	err := td.Update(ctx, false, func(tx plexus.StateTx) error {
		wg.Add(2)
		go func() {
			defer wg.Done()
			err := td.Update(ctx, false, func(tx plexus.StateTx) error {
				if err := tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "daemon.rolledback"}); err != nil {
					return err
				}
				return failing
			})
			if !errors.Is(err, failing) {
				t.Errorf("failing update = %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			<-release
			record(td.DB, false, "daemon.three")
		}()
		return nil // no row: the batch after this one starts from the remembered head
	})
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	wg.Wait()
	record(cli, false, "cli.four")
	record(td.DB, true, "daemon.four") // durable
	rep, err := td.Verify(ctx, td.vopts())
	if err != nil || !rep.OK || rep.Rows != 8 {
		t.Fatalf("Verify = %+v, %v; want 8 rows, ok", rep, err)
	}
	rows, err := td.Activity(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].PrevHash != rows[i-1].Hash {
			t.Errorf("row %d (%s) links to %.8s, want row %d's %.8s", rows[i].ID, rows[i].ActionType, rows[i].PrevHash, rows[i-1].ID, rows[i-1].Hash)
		}
	}
}
