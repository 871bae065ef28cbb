package gateway

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/plexus-gw/plexus"
)

// validator performs the spec's lightweight input validation: required keys
// present, each top-level property's primitive type, and additionalProperties
// false when the schema says so. Nested objects, $ref, format and unions are
// not enforced at invoke (§1, schema-validation note).
type validator struct {
	mu    sync.RWMutex // guards cache
	cache map[string]*shallowSchema
}

type shallowSchema struct {
	raw        string
	required   []string
	types      map[string][]string
	closed     bool
	properties map[string]bool
}

func newValidator() *validator { return &validator{cache: make(map[string]*shallowSchema)} }

func (v *validator) schema(e plexus.Entry) *shallowSchema {
	if e.IO == nil || len(e.IO.Input) == 0 {
		return nil
	}
	v.mu.RLock()
	s := v.cache[e.ID]
	v.mu.RUnlock()
	if s != nil && s.raw == string(e.IO.Input) { // compared in place, not copied
		return s
	}
	s = parseShallow(string(e.IO.Input))
	v.mu.Lock()
	v.cache[e.ID] = s
	v.mu.Unlock()
	return s
}

func parseShallow(raw string) *shallowSchema {
	s := &shallowSchema{raw: raw, types: map[string][]string{}, properties: map[string]bool{}}
	var doc struct {
		Required             []string                   `json:"required"`
		Properties           map[string]json.RawMessage `json:"properties"`
		AdditionalProperties json.RawMessage            `json:"additionalProperties"`
	}
	if json.Unmarshal([]byte(raw), &doc) != nil {
		return s // boolean or odd schemas: nothing shallow to enforce
	}
	s.required = doc.Required
	s.closed = strings.TrimSpace(string(doc.AdditionalProperties)) == "false"
	for name, p := range doc.Properties {
		s.properties[name] = true
		var prop struct {
			Type json.RawMessage `json:"type"`
		}
		if json.Unmarshal(p, &prop) != nil || len(prop.Type) == 0 {
			continue
		}
		var one string
		var many []string
		if json.Unmarshal(prop.Type, &one) == nil {
			s.types[name] = []string{one}
		} else if json.Unmarshal(prop.Type, &many) == nil {
			s.types[name] = many
		}
	}
	return s
}

func (v *validator) validate(e plexus.Entry, input map[string]any) *plexus.Error {
	s := v.schema(e)
	if s == nil {
		return nil
	}
	var problems []string
	for _, k := range s.required {
		if _, ok := input[k]; !ok {
			problems = append(problems, fmt.Sprintf("missing required field %q", k))
		}
	}
	keys := make([]string, 0, len(input))
	for k := range input {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if s.closed && !s.properties[k] {
			problems = append(problems, fmt.Sprintf("unexpected field %q", k))
			continue
		}
		want, ok := s.types[k]
		if !ok {
			continue
		}
		if got := jsonType(input[k]); !typeAllowed(got, input[k], want) {
			problems = append(problems, fmt.Sprintf("field %q must be %s, got %s", k, strings.Join(want, " or "), got))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	e2 := plexus.Errorf(plexus.CodeSchemaValidationFailed, "input does not match %s's io.input: %s", e.ID, strings.Join(problems, "; "))
	e2.Detail = map[string]any{"problems": problems}
	return e2
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64, json.Number, int, int64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

func typeAllowed(got string, v any, want []string) bool {
	for _, w := range want {
		if w == got {
			return true
		}
		if w == "integer" && got == "number" {
			if f, ok := v.(float64); ok && f == math.Trunc(f) && !math.IsInf(f, 0) {
				return true
			}
		}
	}
	return false
}
