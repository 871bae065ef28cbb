package skill

import (
	"context"
	"testing"

	"github.com/plexus-gw/plexus"
)

func TestDispatchRefuses(t *testing.T) {
	res := Transport{}.Dispatch(context.Background(), plexus.Entry{ID: "notes.vault.how-to"}, nil, plexus.DispatchContext{})
	if res.OK || res.Error == nil || res.Error.Code != plexus.CodeTransportError {
		t.Errorf("a skill was invoked: %+v", res)
	}
}
