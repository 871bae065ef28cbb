package gateway

import (
	"fmt"
	"strings"

	"github.com/plexus-gw/plexus"
)

// wildcardSuffix ends a starting grant that names every capability under a
// prefix: "mcp.conf.*".
const wildcardSuffix = ".*"

// expandWildcards replaces each starting grant "<prefix>.*" by one grant of
// each capability entries holds under "<prefix>." now, with the verbs that
// capability requires, when the verbs asked (read when none) cover them:
// "mcp.conf.*=read,write" grants the read tools read and the write tools
// write. A capability it cannot give — one needing execute (never
// standing), or a verb not asked — is declined by name, not granted; a
// pattern that gives nothing refuses the request. Capabilities added later
// are not covered: the grant is what the source serves now. Grants without
// the suffix pass through.
func expandWildcards(entries []plexus.Entry, grants []plexus.ConnectGrant) ([]plexus.ConnectGrant, []plexus.Declined, error) {
	var out []plexus.ConnectGrant
	var declined []plexus.Declined
	for _, cg := range grants {
		prefix, ok := strings.CutSuffix(cg.CapabilityID, wildcardSuffix)
		if !ok {
			if strings.Contains(cg.CapabilityID, "*") {
				return nil, nil, plexus.Errorf(plexus.CodeInvalidRequest,
					"cannot grant %s: a pattern is <prefix>.* (every capability under the prefix)", cg.CapabilityID)
			}
			out = append(out, cg)
			continue
		}
		if prefix == "" || strings.Contains(prefix, "*") {
			return nil, nil, plexus.Errorf(plexus.CodeInvalidRequest,
				"cannot grant %s: a pattern is <prefix>.* with a prefix of its own (mcp.conf.*)", cg.CapabilityID)
		}
		asked := plexus.NormalizeVerbs(cg.Verbs)
		if len(asked) == 0 {
			asked = []plexus.Verb{plexus.VerbRead}
		}
		given := 0
		for _, e := range entries {
			if !strings.HasPrefix(e.ID, prefix+".") || e.Kind == plexus.KindSkill {
				continue
			}
			need := requiredOf(e)
			switch why := wildcardRefusal(need, asked); {
			case why != "":
				declined = append(declined, plexus.Declined{ID: e.ID, Reason: why + " (from " + cg.CapabilityID + ")"})
			default:
				out = append(out, plexus.ConnectGrant{CapabilityID: e.ID, Verbs: need, TrustWindow: cg.TrustWindow, Constraint: cg.Constraint})
				given++
			}
		}
		if given == 0 {
			return nil, nil, plexus.Errorf(plexus.CodeInvalidRequest,
				"cannot grant %s: no capability under %s. can be granted %s (is the source added and listed?)", cg.CapabilityID, prefix, verbList(asked))
		}
	}
	return out, declined, nil
}

// requiredOf is what a call of e needs: its grants, or read.
func requiredOf(e plexus.Entry) []plexus.Verb {
	if v := plexus.NormalizeVerbs(e.Grants); len(v) > 0 {
		return v
	}
	return []plexus.Verb{plexus.VerbRead}
}

// wildcardRefusal says why a wildcard asking for asked cannot grant a
// capability needing need, or "".
func wildcardRefusal(need, asked []plexus.Verb) string {
	for _, v := range need {
		if v == plexus.VerbExecute {
			return "execute is never standing: the owner approves each use when the agent asks"
		}
	}
	if !plexus.CoversVerbs(asked, need) {
		return fmt.Sprintf("it requires %s, more than %s", verbList(need), verbList(asked))
	}
	return ""
}
