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

type sentKey struct{}

// withSent returns ctx saying its call left the process at scheduler
// step: a link that delays calls (slowLink) sends them at once and they
// reach the store later, so a check of what the process knew when it
// sent a call looks at this step, not at the call's arrival.
func withSent(ctx context.Context, step int) context.Context {
	return context.WithValue(ctx, sentKey{}, step)
}

// sentStep returns the step withSent recorded, or arrived if none.
func sentStep(ctx context.Context, arrived int) int {
	if step, ok := ctx.Value(sentKey{}).(int); ok && step < arrived {
		return step
	}
	return arrived
}
