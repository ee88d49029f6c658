package quota

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// account names the provider account a set of shared model names belongs to.
type account struct{ provider, account string }

// sharedModels are the model names of one provider account charged to
// another model's budget (Policy.Models): exact names, and family patterns
// longest first.
type sharedModels struct {
	exact    map[string]string
	patterns []sharedPattern
}

type sharedPattern struct{ prefix, model string }

// resolve returns k with its Model replaced by the model whose budget it is
// charged to (Policy.Models), or k as it is when no policy shares it or
// its model has an account-wide policy of its own.
func (ps Policies) resolve(k Key) Key {
	sm := ps.shared[account{k.Provider, k.Account}]
	if sm == nil {
		return k
	}
	if _, own := ps.byKey[Key{Provider: k.Provider, Account: k.Account, Model: k.Model}]; own {
		return k
	}
	if m, ok := sm.exact[k.Model]; ok {
		k.Model = m
		return k
	}
	for _, p := range sm.patterns {
		if strings.HasPrefix(k.Model, p.prefix) {
			k.Model = p.model
			return k
		}
	}
	return k
}

// Shared returns the model names and patterns charged to k's budget
// (Policy.Models), for status pages; nil when none are.
func (ps Policies) Shared(k Key) []string {
	if p, ok := ps.byKey[k]; ok {
		return p.Models
	}
	return nil
}

// sharedIndex validates the Models of every policy (keys sorted, so the
// first error is the same each time) and indexes them per account.
func sharedIndex(keys []Key, byKey map[Key]Policy) (map[account]*sharedModels, error) {
	var idx map[account]*sharedModels
	owner := map[string]Key{} // "provider/account/name" → the key sharing it
	for _, k := range keys {
		p := byKey[k]
		if len(p.Models) == 0 {
			continue
		}
		if k.Tenant != "" {
			return nil, fmt.Errorf("policy %s: %w", k, invalid("models", strings.Join(p.Models, ","), "is set on a tenant's policy",
				"set models on the account-wide policy: a provider meters shared models per account"))
		}
		acct := account{k.Provider, k.Account}
		for i, name := range p.Models {
			field := "models[" + strconv.Itoa(i) + "]"
			prefix, pattern := strings.CutSuffix(name, "*")
			switch {
			case name == "":
				return nil, fmt.Errorf("policy %s: %w", k, invalid(field, name, "is empty", `name a model, e.g. "claude-3-5-sonnet-20241022", or a family, e.g. "claude-3-5-sonnet-*"`))
			case strings.ContainsRune(prefix, '*'):
				return nil, fmt.Errorf("policy %s: %w", k, invalid(field, name, "has a '*' before its end", `put '*' only at the end, e.g. "claude-3-5-sonnet-*"`))
			case strings.IndexFunc(prefix, badKeyRune) >= 0:
				return nil, fmt.Errorf("policy %s: %w", k, invalid(field, name, "is not a model name", "use letters, digits and punctuation other than '/', '{', '}' and spaces"))
			case !pattern && name == k.Model:
				return nil, fmt.Errorf("policy %s: %w", k, invalid(field, name, "is the policy's own model", "list only the other names charged to this budget"))
			}
			if !pattern {
				other := Key{Provider: k.Provider, Account: k.Account, Model: name}
				if _, own := byKey[other]; own {
					return nil, fmt.Errorf("policy %s: %w", k, invalid(field, name, "has a policy of its own", "remove the name here, or remove its own policy to charge it to this budget"))
				}
			}
			id := k.Provider + "/" + k.Account + "/" + name
			if prev, dup := owner[id]; dup {
				return nil, fmt.Errorf("policy %s: %w", k, invalid(field, name, "is also shared by "+prev.String(), "charge each model name to one budget"))
			}
			owner[id] = k
			if idx == nil {
				idx = map[account]*sharedModels{}
			}
			sm := idx[acct]
			if sm == nil {
				sm = &sharedModels{exact: map[string]string{}}
				idx[acct] = sm
			}
			if pattern {
				sm.patterns = append(sm.patterns, sharedPattern{prefix: prefix, model: k.Model})
			} else {
				sm.exact[name] = k.Model
			}
		}
	}
	for _, sm := range idx {
		sort.SliceStable(sm.patterns, func(i, j int) bool { return len(sm.patterns[i].prefix) > len(sm.patterns[j].prefix) })
	}
	return idx, nil
}
