package plexus

import "testing"

func TestDispatchResult(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		res := DispatchResult("files.read", map[string]any{"n": 1}, nil)
		if !res.OK || res.Error != nil || res.Data.(map[string]any)["n"] != 1 {
			t.Errorf("DispatchResult = %+v; want OK with the data", res)
		}
	})
	t.Run("ErrStampsTheCapability", func(t *testing.T) {
		res := DispatchResult("files.read", "ignored", Errorf(CodeTransportError, "boom"))
		if res.OK || res.Data != nil || res.Error == nil || res.Error.CapabilityID != "files.read" || res.Error.Code != CodeTransportError {
			t.Errorf("DispatchResult = %+v (error %+v); want OK false, the error stamped files.read", res, res.Error)
		}
	})
}
