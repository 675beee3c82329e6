package daytona

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"time"
)

// maxRetryAfter caps how long a Retry-After makes the client wait.
const maxRetryAfter = time.Minute

// retryable reports whether a call that failed with err may be sent
// again: 429 and 503 always (the server did not act on the request);
// other 5xx answers and transport errors only for idempotent calls.
func retryable(err error, idempotent bool) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		switch {
		case ae.StatusCode == http.StatusTooManyRequests, ae.StatusCode == http.StatusServiceUnavailable:
			return true
		case ae.StatusCode >= 500:
			return idempotent && ae.StatusCode != http.StatusNotImplemented
		}
		return false
	}
	var nd *NotDaytonaError
	if errors.As(err, &nd) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	// A dial that timed out already waited long: an address nothing
	// answers at (a wrong API URL) fails once, not once per retry.
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" && oe.Timeout() {
		return false
	}
	return idempotent
}

// backoff returns the pause before retry n (0 for the first): a random
// duration in [d/2, d] for d = base·2ⁿ capped at max (jitter keeps many
// clients from retrying in step), or the answer's Retry-After when it
// says more.
func backoff(n int, base, maxDelay time.Duration, err error) time.Duration {
	d := base << min(n, 20)
	if d <= 0 || d > maxDelay {
		d = maxDelay
	}
	d = d/2 + rand.N(d/2+1)
	var ae *APIError
	if errors.As(err, &ae) && ae.RetryAfter > d {
		d = min(ae.RetryAfter, maxRetryAfter)
	}
	return d
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
