package worker

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/quota"
)

// Account is a provider account a pool member runs on: where the worker
// reaches it and the environment variable that holds its key (read when
// the worker starts, never stored in the Budgets).
type Account struct {
	Provider string
	Account  string
	// APIKeyEnv names the environment variable holding the account's key.
	APIKeyEnv string
	// BaseURL is the account's endpoint; empty means the provider's
	// public API (activities.ProviderConfig.BaseURL).
	BaseURL string
}

// poolEntry is one pool of a policies file:
//
//	pools:
//	  - provider: openai            # required
//	    model: gpt-4o               # required: the model the calls name
//	    fallbacks: []               # optional: where calls go when every member is closed
//	    members:                    # at least one, in order of preference
//	      - account: east           # required, one budget per member
//	        model: gpt-4o           # optional: the member's own model or deployment name; default the pool's
//	        api_key_env: OPENAI_EAST_API_KEY  # required: the variable holding the account's key
//	        base_url: https://east.example.com/v1/  # optional: default the provider's public API
//	        limits: {requests_per_minute: 500}  # and every other field of a policy but provider, tenant,
//	                                            # weight, tenant_weights and fallbacks
type poolEntry struct {
	Provider  string        `yaml:"provider"`
	Model     string        `yaml:"model"`
	Fallbacks []string      `yaml:"fallbacks"`
	Members   []memberEntry `yaml:"members"`
}

type memberEntry struct {
	policyEntry `yaml:",inline"`
	APIKeyEnv   string `yaml:"api_key_env"`
	BaseURL     string `yaml:"base_url"`
}

// envName is what an environment variable's name may be.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parsePools adds each pool's members to policies and returns the pools,
// keyed to their members, each pool's index in the file, and the members'
// accounts.
func parsePools(entries []poolEntry, policies map[quota.Key]quota.Policy, fallbacks map[string][]string) (map[quota.Key][]quota.Key, map[quota.Key]int, []Account, error) {
	pools := make(map[quota.Key][]quota.Key, len(entries))
	index := make(map[quota.Key]int, len(entries))
	var accounts []Account
	seen := map[[2]string]int{} // provider/account → its index in accounts
	for i, pe := range entries {
		field := fmt.Sprintf("pools[%d]", i)
		key := quota.Key{Provider: pe.Provider, Model: pe.Model}
		if err := key.Validate(); err != nil {
			return nil, nil, nil, policyErr(field, err)
		}
		if _, dup := index[key]; dup {
			return nil, nil, nil, &PolicyError{Field: field, Value: key.String(), Problem: "is listed twice", Fix: "keep one pool per provider/model"}
		}
		if len(pe.Members) == 0 {
			return nil, nil, nil, &PolicyError{Field: field + ".members", Problem: "is empty",
				Fix: "list the accounts (account, api_key_env, limits) whose deployments serve " + key.String()}
		}
		index[key] = i
		for j, me := range pe.Members {
			mf := fmt.Sprintf("%s.members[%d]", field, j)
			for _, f := range [...]struct {
				name, value string
				set         bool
			}{
				{"provider", me.Provider, me.Provider != "" && me.Provider != pe.Provider},
				{"tenant", me.Tenant, me.Tenant != ""},
				{"weight", strconv.FormatFloat(me.Weight, 'g', -1, 64), me.Weight != 0},
				{"fallbacks", strings.Join(me.Fallbacks, ","), len(me.Fallbacks) > 0},
				{"spend_fallback", "true", me.SpendFallback},
			} {
				if f.set {
					return nil, nil, nil, &PolicyError{Field: mf + "." + f.name, Value: f.value, Problem: "is set on a pool member",
						Fix: "leave it out: a member is of the pool's provider, and tenants and fallbacks belong to the pool's calls"}
				}
			}
			me.Provider = pe.Provider
			if me.Model == "" {
				me.Model = pe.Model
			}
			mk := quota.Key{Provider: me.Provider, Account: me.Account, Model: me.Model}
			switch {
			case me.Account == "":
				return nil, nil, nil, &PolicyError{Field: mf + ".account", Problem: "is empty",
					Fix: "name the account (e.g. east, or the Azure resource): each member is its own budget and key"}
			case me.APIKeyEnv == "":
				return nil, nil, nil, &PolicyError{Field: mf + ".api_key_env", Problem: "is empty",
					Fix: "name the environment variable holding the account's key, e.g. OPENAI_EAST_API_KEY"}
			case !envName.MatchString(me.APIKeyEnv):
				return nil, nil, nil, &PolicyError{Field: mf + ".api_key_env", Value: me.APIKeyEnv, Problem: "is not an environment variable's name",
					Fix: "name the variable (letters, digits and '_'), not its value, e.g. OPENAI_EAST_API_KEY"}
			}
			if err := mk.Validate(); err != nil {
				return nil, nil, nil, policyErr(mf, err)
			}
			if me.BaseURL != "" {
				if u, err := url.Parse(me.BaseURL); err != nil || u.Scheme == "" || u.Host == "" {
					return nil, nil, nil, &PolicyError{Field: mf + ".base_url", Value: me.BaseURL, Problem: "is not an absolute URL",
						Fix: `use e.g. "https://east.example.com/v1/" (OpenAI's includes /v1/), or leave it out for the provider's public API`}
				}
			}
			if _, dup := policies[mk]; dup {
				return nil, nil, nil, &PolicyError{Field: mf, Value: mk.String(), Problem: "has a budget listed elsewhere in the file",
					Fix: "give each member's limits once, on the member"}
			}
			p, err := me.policy(mf)
			if err != nil {
				return nil, nil, nil, err
			}
			policies[mk] = p
			pools[key] = append(pools[key], mk)
			acct := Account{Provider: mk.Provider, Account: mk.Account, APIKeyEnv: me.APIKeyEnv, BaseURL: me.BaseURL}
			if k, ok := seen[[2]string{mk.Provider, mk.Account}]; ok {
				if accounts[k] != acct {
					return nil, nil, nil, &PolicyError{Field: mf, Value: mk.Provider + "/" + mk.Account, Problem: "names an account another member reaches with another api_key_env or base_url",
						Fix: "give one account the same api_key_env and base_url wherever it is a member"}
				}
				continue
			}
			seen[[2]string{mk.Provider, mk.Account}] = len(accounts)
			accounts = append(accounts, acct)
		}
		for j, to := range pe.Fallbacks {
			if _, err := tollgate.ParseTarget(to); err != nil {
				return nil, nil, nil, &PolicyError{Field: fmt.Sprintf("%s.fallbacks[%d]", field, j), Value: to, Problem: "is not a target",
					Fix: `use "provider/model" or "provider/account/model", e.g. "anthropic/claude-3-5-haiku-latest"`, Err: err}
			}
		}
		if len(pe.Fallbacks) > 0 {
			fallbacks[tollgate.Target{Provider: key.Provider, Model: key.Model}.String()] = append([]string(nil), pe.Fallbacks...)
		}
	}
	return pools, index, accounts, nil
}

// poolsErr turns pool.New's error into a *PolicyError on the pool's
// entry.
func poolsErr(err error, index map[quota.Key]int) error {
	var inv *quota.InvalidError
	if !errors.As(err, &inv) {
		return err
	}
	for k, i := range index {
		if strings.HasPrefix(err.Error(), "pool "+k.String()+":") {
			f := strings.TrimPrefix(inv.Field, "key")
			f = strings.TrimPrefix(f, ".")
			field := fmt.Sprintf("pools[%d]", i)
			if f != "" {
				field += "." + f
			}
			return &PolicyError{Field: field, Value: inv.Value, Problem: inv.Problem, Fix: inv.Fix, Err: err}
		}
	}
	return err
}

func policyErr(field string, err error) error {
	var inv *quota.InvalidError
	if errors.As(err, &inv) {
		return &PolicyError{Field: field + "." + trimKeyPrefix(inv.Field), Value: inv.Value, Problem: inv.Problem, Fix: inv.Fix, Err: err}
	}
	return fmt.Errorf("%s: %w", field, err)
}

// accountConfigs reads each account's key from the environment variable
// it names (lookup, os.LookupEnv in a worker): an unset or empty one is an
// error naming the variable.
func (b Budgets) accountConfigs(lookup func(string) (string, bool)) ([]activities.AccountConfig, error) {
	out := make([]activities.AccountConfig, 0, len(b.Accounts))
	for _, a := range b.Accounts {
		key, _ := lookup(a.APIKeyEnv)
		if key == "" {
			return nil, fmt.Errorf("worker: %s is empty: set it to the API key of %s account %q (a pool member in POLICIES names it)", a.APIKeyEnv, a.Provider, a.Account)
		}
		out = append(out, activities.AccountConfig{Provider: a.Provider, Account: a.Account,
			Config: activities.ProviderConfig{APIKey: key, BaseURL: a.BaseURL}})
	}
	return out, nil
}
