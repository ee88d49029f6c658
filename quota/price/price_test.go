package price_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/price"
)

func TestSpend(t *testing.T) {
	p := price.Price{Input: quota.Dollars(3), CachedInput: quota.Dollars(0.30), CacheWrite: quota.Dollars(3.75), Output: quota.Dollars(15)}
	// 1000 plain, 2000 read, 500 written, 400 out: 3000+600+1875+6000 µ$.
	require.Equal(t, quota.Money(11475), p.Spend(price.Usage{InputTokens: 3500, CacheReadTokens: 2000, CacheWriteTokens: 500, OutputTokens: 400}))
	// Rounded up to a whole millionth.
	require.Equal(t, quota.Money(1), price.Price{Input: quota.Dollars(0.05)}.Spend(price.Usage{InputTokens: 1}))
	// Unset cache prices bill at Input.
	require.Equal(t, quota.Money(300), price.Price{Input: quota.Dollars(0.10), Output: 1}.Spend(price.Usage{InputTokens: 3000, CacheReadTokens: 1000}))
	// The estimate prices the prompt at the dearer input price and the
	// whole answer: settling can only refund.
	c := quota.Cost{Requests: 1, Tokens: 1400, InputTokens: 1000, OutputTokens: 400}
	est := p.Estimate(c)
	require.Equal(t, quota.Money(3750+6000), est)
	require.GreaterOrEqual(t, est, p.Spend(price.Usage{InputTokens: 1000, CacheWriteTokens: 1000, OutputTokens: 400}))
	// Huge counts saturate instead of wrapping.
	require.Positive(t, p.Spend(price.Usage{InputTokens: 1 << 62, OutputTokens: 1 << 62}))
}

func TestTable(t *testing.T) {
	ps, err := price.NewTable(map[string]price.Price{
		"anthropic/claude-sonnet-4*":   {Input: 3, Output: 15},
		"anthropic/claude-sonnet-4-5*": {Input: 4, Output: 16},
		"anthropic/claude-sonnet-4-0":  {Input: 5, Output: 17},
	})
	require.NoError(t, err)
	for model, want := range map[string]quota.Money{"claude-sonnet-4-20250514": 3, "claude-sonnet-4-5-20250929": 4, "claude-sonnet-4-0": 5} {
		p, ok := ps.Lookup("anthropic", model)
		require.True(t, ok, model)
		require.Equal(t, want, p.Input, model)
	}
	_, ok := ps.Lookup("openai", "claude-sonnet-4-0")
	require.False(t, ok)
	more, err := ps.With(map[string]price.Price{"anthropic/claude-sonnet-4*": {Input: 9, Output: 9}})
	require.NoError(t, err)
	p, _ := more.Lookup("anthropic", "claude-sonnet-4-x")
	require.Equal(t, quota.Money(9), p.Input)

	for name, bad := range map[string]price.Price{
		"gpt-4o":           {Input: 1, Output: 1},
		"openai/":          {Input: 1, Output: 1},
		"openai/gpt-4o":    {Input: -1, Output: 1},
		"openai/gpt-4o-mi": {},
	} {
		_, err := price.NewTable(map[string]price.Price{name: bad})
		var inv *quota.InvalidError
		require.True(t, errors.As(err, &inv), "%s: %v", name, err)
		require.Contains(t, inv.Field, "prices."+name)
	}
}

func TestShipped(t *testing.T) {
	ps := price.Shipped()
	for _, m := range [][2]string{{"openai", "gpt-4o"}, {"openai", "gpt-4o-mini"}, {"anthropic", "claude-sonnet-4-5"}, {"anthropic", "claude-haiku-4-5"}, {"gemini", "gemini-2.5-flash"}} {
		p, ok := ps.Lookup(m[0], m[1])
		require.True(t, ok, "%v", m)
		require.Positive(t, p.Input)
		require.Greater(t, p.Output, p.Input, "%v: output dearer than input", m)
	}
	lite, _ := ps.Lookup("gemini", "gemini-2.5-flash-lite")
	flash, _ := ps.Lookup("gemini", "gemini-2.5-flash")
	require.Less(t, lite.Input, flash.Input, "the longer pattern wins")
}
