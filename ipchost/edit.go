package ipchost

import (
	"errors"
	"fmt"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/ipc"
)

// EditError is an edit of providers.json refused for the owner to act on;
// nothing was written.
type EditError struct{ Msg string }

func (e *EditError) Error() string { return e.Msg }

// Declare writes provider id's cfg into the providers.json at path. A
// provider already declared under id is replaced only when replace is set;
// replaced reports whether one was.
func Declare(path, id string, cfg plexus.ProviderConfig, replace bool) (replaced bool, err error) {
	doc, err := ReadFile(path)
	if err != nil {
		return false, err
	}
	_, exists := doc.Configs()[id]
	if exists && !replace {
		return false, &EditError{fmt.Sprintf("a provider %q is already declared; use --replace to change it, or plexus providers remove %s", id, id)}
	}
	if err := doc.Set(id, cfg); err != nil {
		var ce *ipc.ConfigError
		if errors.As(err, &ce) {
			return false, &EditError{fmt.Sprintf("%v; nothing was written", err)}
		}
		return false, err
	}
	return exists, doc.Save()
}

// Remove drops provider id from the providers.json at path.
func Remove(path, id string) error {
	doc, err := ReadFile(path)
	if err != nil {
		return err
	}
	if !doc.Remove(id) {
		return &EditError{fmt.Sprintf("no provider %q in %s (see: plexus providers list)", id, path)}
	}
	return doc.Save()
}
