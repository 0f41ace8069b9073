package sim

import "context"

type procKey struct{}

// WithProc returns ctx naming the simulated process every store call made
// with it belongs to.
func WithProc(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, procKey{}, name)
}

// ProcName returns the process ctx names, or "".
func ProcName(ctx context.Context) string {
	name, _ := ctx.Value(procKey{}).(string)
	return name
}
