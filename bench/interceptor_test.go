package bench

import (
	"context"
	"testing"

	sdkinterceptor "go.temporal.io/sdk/interceptor"

	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota/memory"
)

// done is the activity below the interceptor: it returns at once.
type done struct {
	sdkinterceptor.ActivityInboundInterceptorBase
}

func (*done) ExecuteActivity(context.Context, *sdkinterceptor.ExecuteActivityInput) (any, error) {
	return "ok", nil
}

// BenchmarkUngovernedActivity is what Tollgate adds to an activity it does
// not govern (its input does not implement quota.Governed and its type is
// not in Options.Activities), against calling the activity directly.
func BenchmarkUngovernedActivity(b *testing.B) {
	ctx := context.Background()
	in := &sdkinterceptor.ExecuteActivityInput{Args: []any{"a plain string input"}}
	b.Run("direct", func(b *testing.B) {
		var next sdkinterceptor.ActivityInboundInterceptor = &done{}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := next.ExecuteActivity(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tollgate", func(b *testing.B) {
		store, err := memory.New(policies(b, 4), memory.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ic, err := interceptor.New(interceptor.Options{Store: store})
		if err != nil {
			b.Fatal(err)
		}
		wrapped := ic.InterceptActivity(ctx, &done{})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wrapped.ExecuteActivity(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	})
}
