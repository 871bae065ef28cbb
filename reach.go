package plexus

// Reach is what an entry touches when it is called, read by the gateway
// from the entry's route, never from the author's prose: the program and
// its argv template (cli), the command line (stdio), the method and URL
// (local-rest), the provider and its tool (ipc), or the members (workflow),
// with the secrets it is handed. A decision file, `plexus show` and
// `plexus pending` put it where the owner looks first, so that what the
// owner approves is what runs.
type Reach struct {
	Transport TransportKind `json:"transport"`
	// Bin is the program as the route names it (cli, stdio).
	Bin string `json:"bin,omitempty"`
	// Path is the absolute path Bin resolves to on the daemon's PATH when
	// the decision was put up; empty when it could not be resolved (then
	// Unknown says why).
	Path string `json:"path,omitempty"`
	// Target is the file Path resolves to through symbolic links, when it
	// differs from Path: what runs.
	Target string `json:"target,omitempty"`
	// Args is the argv template (cli) or the fixed arguments (stdio).
	Args []string `json:"args,omitempty"`
	// Method is the HTTP method (local-rest) or the JSON-RPC method (stdio).
	Method string `json:"method,omitempty"`
	// URL is the full URL template a local-rest call goes to.
	URL string `json:"url,omitempty"`
	// Provider and Tool are the ipc provider and the command it is asked to run.
	Provider string `json:"provider,omitempty"`
	Tool     string `json:"tool,omitempty"`
	// Members are a workflow's members, each with the verbs it runs with.
	Members []WorkflowMember `json:"members,omitempty"`
	// Secrets are the names of the secrets the call is handed.
	Secrets []string `json:"secrets,omitempty"`
	// Unknown says plainly what about the reach cannot be known, and why.
	Unknown string `json:"unknown,omitempty"`
	// Declared are the verbs the author declared; Verbs are the verbs the
	// gateway requires (never fewer), and Why says why they differ.
	Declared []Verb `json:"declared,omitempty"`
	Verbs    []Verb `json:"verbs,omitempty"`
	Why      string `json:"why,omitempty"`
}

// ReachOf is the reach the gateway recorded in narration for entry id, or
// nil when it recorded none (a decision that predates the check).
func ReachOf(narration []PendingNarration, id string) *Reach {
	for i := range narration {
		if narration[i].ID == id && narration[i].Reach != nil {
			return narration[i].Reach
		}
	}
	return nil
}
