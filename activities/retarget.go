package activities

import (
	"fmt"

	"github.com/tollgate/tollgate"
)

var _ tollgate.Retargetable = Request{}

// Retarget implements tollgate.Retargetable: the request sent to t's
// provider, account and model, for a fallback step. A provider this package
// does not speak is an error naming it.
func (r Request) Retarget(t tollgate.Target) (any, error) {
	switch t.Provider {
	case OpenAI, Anthropic, Gemini:
	default:
		return nil, fmt.Errorf("activities: fallback target %q: provider %q is not one of %q, %q, %q", t, t.Provider, OpenAI, Anthropic, Gemini)
	}
	moved := r.WithModel(t.Provider, t.Model)
	moved.Account = t.Account
	return moved, nil
}
