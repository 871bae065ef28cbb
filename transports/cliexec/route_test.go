package cliexec

import "testing"

func TestSecretVariableName(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"obsidian-rest-api-key", "PLEXUS_SECRET_OBSIDIAN_REST_API_KEY"},
		{"github.token", "PLEXUS_SECRET_GITHUB_TOKEN"},
		{"Key2", "PLEXUS_SECRET_KEY2"},
		{"clé", "PLEXUS_SECRET_CL_"},
	} {
		if got := secretPrefix + upperSnake(tc.name); got != tc.want {
			t.Errorf("variable for %q = %q, want %q", tc.name, got, tc.want)
		}
	}
}
