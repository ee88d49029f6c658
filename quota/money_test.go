package quota_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

func TestMoneyString(t *testing.T) {
	for m, want := range map[quota.Money]string{
		0: "0.00", quota.Dollars(12.5): "12.50", 125: "0.000125", quota.Dollars(-3): "-3.00", quota.Dollars(1.234567): "1.234567",
	} {
		require.Equal(t, want, m.String())
	}
}

func TestParseMoney(t *testing.T) {
	for s, want := range map[string]quota.Money{"50": quota.Dollars(50), "$12.5": quota.Dollars(12.5), "0.000125": 125, ".5": quota.Dollars(0.5)} {
		got, err := quota.ParseMoney(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "-1", "1.", "1.0000001", "ten", "1e3", "99999999999999"} {
		_, err := quota.ParseMoney(s)
		require.Error(t, err, s)
	}
}

func TestSpendLimits(t *testing.T) {
	m := quota.MonthlySpend(quota.Dollars(50), nil)
	require.NoError(t, m.Validate())
	require.Equal(t, quota.MonthlyWindow, m.Axis.Kind())
	require.Equal(t, "50.00 spend_per_month (UTC)", m.String())
	require.Error(t, quota.MonthlySpend(0, nil).Validate())
	bad := quota.PerDay(quota.SpendPerMonth, 5, nil)
	require.ErrorContains(t, bad.Validate(), "quota.MonthlySpend")
	a, err := quota.ParseAxis("spend_per_day")
	require.NoError(t, err)
	require.Equal(t, quota.SpendPerDay, a)
	require.Equal(t, "spend=0.0001", quota.Cost{Spend: 100}.String())
}
