package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/plexus-gw/plexus"
)

// Constraint match operators. OpRegex is reserved by the protocol and not
// enforced: a constraint using it is invalid and never satisfied.
const (
	OpEq     = "eq"
	OpPrefix = "prefix"
	OpIn     = "in"
	OpRegex  = "regex"
)

// ValidateConstraint checks c's structure: at least one predicate; every
// field non-empty and a well-formed dotted path; pathPrefix allow entries
// that are non-empty clean relative paths ("." admits the whole root); allow values present; match ops one of eq
// (with a scalar value), prefix (with a non-empty string value) or in (with
// scalar values). A nil c is valid (no constraint).
func ValidateConstraint(c *plexus.ScopeConstraint) error {
	if c == nil {
		return nil
	}
	if c.PathPrefix == nil && c.Allow == nil && len(c.Match) == 0 {
		return errors.New("constraint has no predicate")
	}
	if pp := c.PathPrefix; pp != nil {
		if err := validField(pp.Field); err != nil {
			return fmt.Errorf("pathPrefix.field: %w", err)
		}
		if len(pp.Allow) == 0 {
			return errors.New("pathPrefix.allow is empty")
		}
		for i, a := range pp.Allow {
			if _, ok := cleanRelPath(a); !ok || a == "" {
				return fmt.Errorf("pathPrefix.allow[%d] %q: not a clean relative path", i, a)
			}
		}
	}
	if al := c.Allow; al != nil {
		if err := validField(al.Field); err != nil {
			return fmt.Errorf("allow.field: %w", err)
		}
		if len(al.Values) == 0 {
			return errors.New("allow.values is empty")
		}
	}
	for i, m := range c.Match {
		if err := validMatch(m); err != nil {
			return fmt.Errorf("match[%d]: %w", i, err)
		}
	}
	return nil
}

func validField(f string) error {
	if f == "" {
		return errors.New("empty")
	}
	if slices.Contains(strings.Split(f, "."), "") {
		return fmt.Errorf("%q has an empty path segment", f)
	}
	return nil
}

func validMatch(m plexus.ScopeMatch) error {
	if err := validField(m.Field); err != nil {
		return fmt.Errorf("field: %w", err)
	}
	switch m.Op {
	case OpEq:
		if _, ok := scalar(m.Value); !ok {
			return errors.New("eq needs a string, number or boolean value")
		}
	case OpPrefix:
		if s, ok := m.Value.(string); !ok || s == "" {
			return errors.New("prefix needs a non-empty string value")
		}
	case OpIn:
		if len(m.Values) == 0 {
			return errors.New("in needs values")
		}
		for _, v := range m.Values {
			if _, ok := scalar(v); !ok {
				return errors.New("in needs string, number or boolean values")
			}
		}
	case OpRegex:
		return errors.New(`op "regex" is reserved and not enforced`)
	default:
		return fmt.Errorf("unknown op %q", m.Op)
	}
	return nil
}

// ResolvePath maps a clean relative path a call names ("/"-separated, "."
// for the root) to the one it reaches: the same path with every symbolic
// link on the way followed inside the folder the transport confines the
// call to. An error means the path cannot be resolved there (a link out of
// the folder, a loop), and a constraint on it is not satisfied.
type ResolvePath func(p string) (string, error)

// SatisfiedResolved reports whether input satisfies every predicate of c
// (AND). A nil c is satisfied by anything. Evaluation fails closed: an
// invalid constraint (see [ValidateConstraint]: empty, unknown op, regex), a
// missing field, or a field of the wrong type is not satisfied.
//
// Fields are dotted paths into nested objects ("repo.owner"). pathPrefix
// requires a string field holding a relative path that, cleaned lexically,
// equals or lies under one of the allow prefixes, compared on whole path
// segments ("Inbox" admits "Inbox/a" but not "Inboxer/a"). Absolute paths,
// any ".." segment (even one that cleans away, like "Inbox/../Inbox/x"),
// backslashes, NUL and control characters, and percent-encoded dots or
// separators are refused outright, so no transport's later decoding can
// turn an admitted path into an escaping one. The transport still confines
// the path itself (os.Root in portal); this check only narrows.
//
// Each pathPrefix is checked twice: on the path as the call names it, and,
// when resolve is not nil, on the path resolve says it reaches. A symlink
// inside an allowed prefix that leads elsewhere in the same folder
// ("public/link" → "private/secret.txt") then admits nothing, and a path
// that cannot be resolved fails closed.
func SatisfiedResolved(c *plexus.ScopeConstraint, input map[string]any, resolve ResolvePath) bool {
	if c == nil {
		return true
	}
	if ValidateConstraint(c) != nil {
		return false
	}
	if pp := c.PathPrefix; pp != nil {
		v, ok := lookup(input, pp.Field)
		s, isStr := v.(string)
		if !ok || !isStr || !underAny(s, pp.Allow) || !resolvedUnderAny(s, pp.Allow, resolve) {
			return false
		}
	}
	if al := c.Allow; al != nil {
		v, ok := lookup(input, al.Field)
		s, isStr := v.(string)
		if !ok || !isStr || !slices.Contains(al.Values, s) {
			return false
		}
	}
	for _, m := range c.Match {
		v, ok := lookup(input, m.Field)
		if !ok || !matches(m, v) {
			return false
		}
	}
	return true
}

// lookup follows a dotted path through nested JSON objects.
func lookup(input map[string]any, field string) (any, bool) {
	var cur any = input
	for seg := range strings.SplitSeq(field, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func matches(m plexus.ScopeMatch, v any) bool {
	switch m.Op {
	case OpEq:
		return scalarEqual(v, m.Value)
	case OpPrefix:
		s, ok := v.(string)
		return ok && strings.HasPrefix(s, m.Value.(string))
	case OpIn:
		return slices.ContainsFunc(m.Values, func(w any) bool { return scalarEqual(v, w) })
	}
	return false
}

// scalar normalizes a JSON scalar: strings and booleans as they are, every
// number as float64 (how encoding/json decodes into any). Anything else,
// null, objects, arrays, NaN, is not a scalar.
func scalar(v any) (any, bool) {
	var f float64
	switch x := v.(type) {
	case string, bool:
		return x, true
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int:
		f = float64(x)
	case int8:
		f = float64(x)
	case int16:
		f = float64(x)
	case int32:
		f = float64(x)
	case int64:
		f = float64(x)
	case uint:
		f = float64(x)
	case uint8:
		f = float64(x)
	case uint16:
		f = float64(x)
	case uint32:
		f = float64(x)
	case uint64:
		f = float64(x)
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return nil, false
		}
	default:
		return nil, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, false
	}
	return f, true
}

func scalarEqual(a, b any) bool {
	x, ok1 := scalar(a)
	y, ok2 := scalar(b)
	return ok1 && ok2 && x == y
}

// cleanRelPath returns p cleaned if it is a safe relative path (see
// [SatisfiedResolved]); "." and "" mean the root itself.
func cleanRelPath(p string) (string, bool) {
	if strings.ContainsRune(p, '\\') || strings.ContainsFunc(p, unicode.IsControl) {
		return "", false
	}
	if path.IsAbs(p) || hasDrive(p) {
		return "", false
	}
	lower := strings.ToLower(p)
	for _, enc := range []string{"%2e", "%2f", "%5c", "%00"} {
		if strings.Contains(lower, enc) {
			return "", false
		}
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return "", false
	}
	return path.Clean(p), true
}

// hasDrive reports a Windows drive prefix ("C:"), absolute on that platform.
func hasDrive(p string) bool {
	return len(p) >= 2 && p[1] == ':' && ('a' <= p[0] && p[0] <= 'z' || 'A' <= p[0] && p[0] <= 'Z')
}

// under reports whether clean path p equals or lies beneath clean prefix a.
func under(p, a string) bool {
	return a == "." || p == a || strings.HasPrefix(p, a+"/")
}

func underAny(p string, allow []string) bool {
	cp, ok := cleanRelPath(p)
	if !ok {
		return false
	}
	for _, a := range allow {
		if ca, ok := cleanRelPath(a); ok && under(cp, ca) {
			return true
		}
	}
	return false
}

// resolvedUnderAny reports whether the path p reaches, by resolve, equals
// or lies beneath one of allow; true when there is no resolve. p has passed
// [underAny], so it is a clean relative path.
func resolvedUnderAny(p string, allow []string, resolve ResolvePath) bool {
	if resolve == nil {
		return true
	}
	cp, ok := cleanRelPath(p)
	if !ok {
		return false
	}
	r, err := resolve(cp)
	return err == nil && underAny(r, allow)
}

// Narrows reports whether approved is a narrowing of requested, so that
// approving under it cannot admit a call requested would not. It is
// deliberately conservative, accepting only:
//
//   - requested nil (anything narrows an unconstrained grant), approved valid
//     or nil;
//   - approved equal to requested (JSON-equal);
//   - approved keeping every predicate of requested and adding more, where a
//     kept pathPrefix may also shrink to prefixes each under a requested one
//     (same field), and a kept allow may drop values (same field).
//
// Everything else, including removing the constraint, is a widening and is
// refused. An invalid approved constraint never narrows.
func Narrows(approved, requested *plexus.ScopeConstraint) bool {
	if approved != nil && ValidateConstraint(approved) != nil {
		return false
	}
	if requested == nil {
		return true
	}
	if approved == nil {
		return false
	}
	if jsonEqual(approved, requested) {
		return true
	}
	if rp := requested.PathPrefix; rp != nil {
		ap := approved.PathPrefix
		if ap == nil || ap.Field != rp.Field {
			return false
		}
		for _, a := range ap.Allow {
			if !underAny(a, rp.Allow) {
				return false
			}
		}
	}
	if ra := requested.Allow; ra != nil {
		aa := approved.Allow
		if aa == nil || aa.Field != ra.Field {
			return false
		}
		for _, v := range aa.Values {
			if !slices.Contains(ra.Values, v) {
				return false
			}
		}
	}
	for _, rm := range requested.Match {
		if !slices.ContainsFunc(approved.Match, func(am plexus.ScopeMatch) bool { return jsonEqual(am, rm) }) {
			return false
		}
	}
	return true
}

// jsonEqual compares a and b by their JSON encoding, so that numbers compare
// the way they travel (1 and 1.0 are equal).
func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
