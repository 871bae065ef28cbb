package mcpclient

import (
	"errors"
	"testing"
)

// TestValidateNamesFirstFaultInOrder: a config with several bad variables
// or headers always names the first by name, so reading the same mcp.json
// twice reports the same fault (found by FuzzMCPConfig: the fault named
// followed map order).
func TestValidateNamesFirstFaultInOrder(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cfg   ServerConfig
		field string
	}{
		{"Env", ServerConfig{Command: "x", Env: map[string]string{"9b": "1", "1a": "1", "5c": "1", "PLEXUS_X": "1", "3d": "1"}}, "env.1a"},
		{"Headers", ServerConfig{URL: "http://127.0.0.1/", Headers: map[string]string{"b c": "1", "a b": "1", "Host": "x", "d e": "1"}}, "headers.Host"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for range 50 {
				var ce *ConfigError
				if err := tt.cfg.Validate(); !errors.As(err, &ce) || ce.Field != tt.field {
					t.Fatalf("Validate = %v, want the fault of %s", err, tt.field)
				}
			}
		})
	}
}
