package stdio

import (
	"errors"
	"strings"
)

// redacted replaces a secret's value wherever a tool echoes it.
const redacted = "[redacted]"

// redactor removes one secret value from what leaves the transport; the
// empty redactor changes nothing.
type redactor string

func (r redactor) string(s string) string {
	if r == "" || !strings.Contains(s, string(r)) {
		return s
	}
	return strings.ReplaceAll(s, string(r), redacted)
}

// err returns err, or an error with its text redacted if the text holds
// the secret. The redacted copy does not wrap the original, so the secret
// cannot be reached through errors.Unwrap either.
func (r redactor) err(err error) error {
	if err == nil {
		return nil
	}
	if s := r.string(err.Error()); s != err.Error() {
		return errors.New(s)
	}
	return err
}

// value redacts every string, and every object key, of a decoded JSON
// value, in place where it can.
func (r redactor) value(v any) any {
	if r == "" {
		return v
	}
	switch v := v.(type) {
	case string:
		return r.string(v)
	case []any:
		for i := range v {
			v[i] = r.value(v[i])
		}
		return v
	case map[string]any:
		for k, e := range v {
			if rk := r.string(k); rk != k {
				delete(v, k)
				v[rk] = r.value(e)
				continue
			}
			v[k] = r.value(e)
		}
		return v
	}
	return v
}
