package journal

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// mirrorIndex is the audit mirror as verify reads it: per row id, a digest
// of the line (its content, prev_hash and hash) and the file it is in.
// Only digests are kept, so a large mirror costs about a hundred bytes a
// row.
//
// What counts as tampering (docs/journal.md, "What verify compares"): a
// row in both with different content or hash, a row in the mirror but not
// in the table, an id twice in the mirror with different content. What
// does not: a row in the table but missing from the mirror between rows
// that are in it. The mirror is appended after the commit and is best
// effort (a crash between the two, a failed append), and the row itself is
// checked by the chain; such gaps are notes. Rows older than the oldest
// mirror file (retention) and newer than its newest line (verify may run
// between a commit and its append) are not expected in it.
type mirrorIndex struct {
	rows         map[int64]*mirrorEntry
	minID, maxID int64
	problems     []Problem // found while reading
	notes        []Problem
	differ       []mirrorDiff
	absent       []int64 // table rows missing from the mirror
	chain        *chainer
}

type mirrorEntry struct {
	sum      [sha256.Size]byte // the whole line
	content  [sha256.Size]byte // the hashed content alone
	hash     string
	prevHash string
	file     string
	seen     bool
	// keyed says the line's hash is its HMAC under the key, plain that it
	// is its plain SHA-256: after a prune the mirror holds the only copy
	// of the pruned rows, and checkPruned checks them.
	keyed, plain bool
}

type mirrorDiff struct {
	id     int64
	reason string
}

// maxMirrorLine bounds one mirror line; Record's rows are far smaller.
const maxMirrorLine = 16 << 20

// readMirror reads every YYYY-MM-DD.jsonl file in dir, oldest first,
// checking each line's hash under chain (nil without the key). A missing
// dir is an empty mirror.
func readMirror(dir string, chain *chainer) (*mirrorIndex, error) {
	m := &mirrorIndex{rows: map[int64]*mirrorEntry{}, chain: chain}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit mirror: %w", err)
	}
	var names []string
	for _, e := range entries {
		day, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if _, err := time.Parse(mirrorDayLayout, day); err == nil {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if err := m.readFile(filepath.Join(dir, name), name); err != nil {
			return nil, fmt.Errorf("audit mirror %s: %w", name, err)
		}
	}
	return m, nil
}

func (m *mirrorIndex) readFile(path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxMirrorLine)
	var pending *Problem // an unreadable line, a problem unless it is the last
	line := 0
	for sc.Scan() {
		line++
		if pending != nil {
			m.problems = append(m.problems, *pending)
			pending = nil
		}
		var r mirrorRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.ID <= 0 {
			pending = &Problem{Kind: ProblemMirror, Detail: fmt.Sprintf("%s line %d is not a mirror row: it was edited", name, line)}
			continue
		}
		m.add(&r, name)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if pending != nil {
		// A torn last line is what a power failure during an append
		// leaves; SQLite holds the row.
		pending.Detail = fmt.Sprintf("%s ends in an unreadable line (%d): a power failure during an append, or an edit", name, line)
		m.notes = append(m.notes, *pending)
	}
	return nil
}

func (m *mirrorIndex) add(r *mirrorRow, file string) {
	sum, content := mirrorDigest(r)
	if e, ok := m.rows[r.ID]; ok {
		if e.sum != sum {
			m.problems = append(m.problems, Problem{ID: r.ID, Kind: ProblemMirror, Detail: fmt.Sprintf(
				"row %d is in the audit mirror twice with different content (%s, %s): its id was issued twice, after rows were deleted from the end",
				r.ID, e.file, file)})
		}
		return
	}
	e := &mirrorEntry{sum: sum, content: content, hash: r.Hash, prevHash: r.PrevHash, file: file}
	if c, err := canonicalOf(r); err == nil {
		e.keyed = m.chain != nil && hmacEqual(m.chain.rowHash(r.PrevHash, c), r.Hash)
		e.plain = !e.keyed && legacyHash(r.PrevHash, c) == r.Hash
	}
	m.rows[r.ID] = e
	if m.minID == 0 || r.ID < m.minID {
		m.minID = r.ID
	}
	m.maxID = max(m.maxID, r.ID)
}

// mirrorDigest digests everything a line says about its row, and its
// hashed content alone (which tells an edit from a re-chaining).
func mirrorDigest(r *mirrorRow) (line, content [sha256.Size]byte) {
	c, err := canonicalOf(r)
	if err != nil {
		c = r.Payload // unencodable: compare the raw text instead
	}
	content = sha256.Sum256(c)
	h := sha256.New()
	h.Write(content[:])
	h.Write([]byte(r.PrevHash))
	h.Write([]byte{0})
	h.Write([]byte(r.Hash))
	h.Sum(line[:0])
	return line, content
}

// compare checks one table row against its mirror line. contentOK says
// whether the row passed its chain check, which tells which side changed.
func (m *mirrorIndex) compare(r *mirrorRow, contentOK bool) {
	e, ok := m.rows[r.ID]
	if !ok {
		if r.ID > m.minID && r.ID < m.maxID {
			m.absent = append(m.absent, r.ID)
		}
		return
	}
	e.seen = true
	line, content := mirrorDigest(r)
	if line == e.sum {
		return
	}
	var reason string
	switch {
	case content == e.content:
		reason = "same content, different hashes: the chain was recomputed (or the mirror's hashes edited)"
	case contentOK && e.hash == r.Hash:
		reason = "the mirror line was edited (the database row verifies)"
	case contentOK:
		reason = "the database holds another row under this id (ids renumbered or reissued), or the mirror line was edited"
	default:
		reason = "the database row's content was edited (the mirror keeps it as written)"
	}
	m.differ = append(m.differ, mirrorDiff{id: r.ID, reason: reason + " [" + e.file + "]"})
}

// finish reports what the walk left: mirror rows the table lacks, rows
// that differ (consecutive rows with the same reason as one problem), and
// the tolerated gaps.
func (m *mirrorIndex) finish(rep *VerifyReport, prunedThrough int64) {
	for _, p := range m.problems {
		rep.add(p)
	}
	rep.Notes = append(rep.Notes, m.notes...)
	for i := 0; i < len(m.differ); {
		j := i + 1
		for j < len(m.differ) && m.differ[j].id == m.differ[j-1].id+1 && m.differ[j].reason == m.differ[i].reason {
			j++
		}
		verb := "differs"
		if j-i > 1 {
			verb = "differ"
		}
		rep.add(Problem{ID: m.differ[i].id, Kind: ProblemMirror, Detail: fmt.Sprintf("%s %s from the audit mirror: %s",
			rowsLabel(m.differ[i].id, m.differ[j-1].id), verb, m.differ[i].reason)})
		i = j
	}
	var gone []int64
	for id, e := range m.rows {
		// Rows pruned from the table stay in the mirror until its retention.
		if !e.seen && id > prunedThrough {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	for _, r := range ranges(gone) {
		rep.add(Problem{ID: r[0], Kind: ProblemMirror, Detail: fmt.Sprintf(
			"%s in the audit mirror but not in the database: deleted", rowsIs(r[0], r[1]))})
	}
	for _, r := range ranges(m.absent) {
		rep.Notes = append(rep.Notes, Problem{ID: r[0], Kind: ProblemMirror, Detail: fmt.Sprintf(
			"%s not in the audit mirror: a crash between the commit and the mirror append, or a failed append (the database rows verify)",
			rowsIs(r[0], r[1]))})
	}
}

// prunedCopy is what checkPruned needs of the newest prune: rows up to
// through are gone from the table and the last of them hashed to head; the
// keyed chain starts after row after; keyed says the key is at hand.
type prunedCopy struct {
	through, after int64
	head           string
	keyed          bool
}

// checkPruned checks the mirror's lines of the rows pruned from the table,
// now their only copy: each line's hash under its row's scheme, its link
// to the line before, and the last one's hash against the checkpoint. An
// edit there would otherwise pass unseen.
func (m *mirrorIndex) checkPruned(rep *VerifyReport, p prunedCopy) {
	var edited, unlinked []int64
	for id, e := range m.rows {
		if e.seen || id > p.through {
			continue
		}
		ok := e.plain
		if id > p.after {
			ok = e.keyed || !p.keyed
		}
		if !ok {
			edited = append(edited, id)
		} else if prev, has := m.rows[id-1]; has && !prev.seen && prev.hash != e.prevHash {
			unlinked = append(unlinked, id)
		}
	}
	slices.Sort(edited)
	slices.Sort(unlinked)
	for _, r := range ranges(edited) {
		rep.add(Problem{ID: r[0], Kind: ProblemMirror, Detail: fmt.Sprintf(
			"the audit mirror's lines of %s (pruned from the database: the mirror is their only copy) do not match their hashes: edited [%s]",
			rowsLabel(r[0], r[1]), m.rows[r[0]].file)})
	}
	for _, id := range unlinked {
		rep.add(Problem{ID: id, Kind: ProblemMirror, Detail: fmt.Sprintf(
			"row %d, pruned from the database, does not chain to row %d in the audit mirror: lines were replaced or reordered", id, id-1)})
	}
	if e, ok := m.rows[p.through]; ok && !e.seen && p.head != "" && e.hash != p.head {
		rep.add(Problem{ID: p.through, Kind: ProblemMirror, Detail: fmt.Sprintf(
			"row %d, the last pruned, has another hash in the audit mirror than the prune checkpoint records: its line was replaced", p.through)})
	}
}

// ranges groups sorted ids into runs of consecutive ids.
func ranges(ids []int64) [][2]int64 {
	var out [][2]int64
	for _, id := range ids {
		if n := len(out); n > 0 && out[n-1][1]+1 == id {
			out[n-1][1] = id
			continue
		}
		out = append(out, [2]int64{id, id})
	}
	return out
}

func rowsLabel(a, b int64) string {
	if a == b {
		return fmt.Sprintf("row %d", a)
	}
	return fmt.Sprintf("rows %d..%d", a, b)
}

func rowsIs(a, b int64) string {
	if a == b {
		return rowsLabel(a, b) + " is"
	}
	return rowsLabel(a, b) + " are"
}
