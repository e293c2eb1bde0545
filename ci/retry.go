package ci

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRateLimitWait is the longest cuecast waits for a primary rate limit to
// reset before giving up.
const maxRateLimitWait = time.Minute

// retryTransport retries GitHub requests that failed for reasons that pass:
// 5xx answers, 429, the secondary rate limit (403 saying so, or with
// Retry-After), a primary rate limit resetting within maxRateLimitWait, and
// connection errors. It waits Retry-After when GitHub sends it, else the
// backoff. Bodies are replayed with Request.GetBody.
type retryTransport struct {
	base     http.RoundTripper
	attempts int
	backoff  func(retry int) time.Duration
	sleep    func(ctx context.Context, d time.Duration) error
	log      *slog.Logger
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		r := req
		if attempt > 1 {
			r = req.Clone(ctx)
			if req.GetBody != nil {
				body, err := req.GetBody()
				if err != nil {
					return nil, fmt.Errorf("replay request body: %w", err)
				}
				r.Body = body
			}
		}
		resp, err := t.base.RoundTrip(r)
		var wait time.Duration
		var why string
		switch {
		case err != nil:
			if ctx.Err() != nil || attempt >= t.attempts || (req.Body != nil && req.GetBody == nil) {
				return nil, err
			}
			wait, why = t.backoff(attempt), err.Error()
		default:
			var retry bool
			wait, why, retry = t.retryable(resp, attempt)
			if !retry || attempt >= t.attempts || (req.Body != nil && req.GetBody == nil) {
				return resp, nil
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		t.log.Warn("github request failed; retrying", "method", req.Method, "path", req.URL.Path,
			"attempt", attempt, "reason", why, "wait", wait)
		if err := t.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("wait to retry %s %s: %w", req.Method, req.URL.Path, err)
		}
	}
}

// retryable decides on an answer. It may read and replace resp.Body.
func (t *retryTransport) retryable(resp *http.Response, attempt int) (time.Duration, string, bool) {
	s := resp.StatusCode
	if s < 400 {
		return 0, "", false
	}
	after, hasAfter := retryAfter(resp.Header)
	switch {
	case s >= 500:
		return pick(after, hasAfter, t.backoff(attempt)), resp.Status, true
	case s == http.StatusTooManyRequests:
		return pick(after, hasAfter, t.backoff(attempt)), "rate limited (429)", true
	case s != http.StatusForbidden:
		return 0, "", false
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	lower := strings.ToLower(string(b))
	if hasAfter || strings.Contains(lower, "secondary rate limit") || strings.Contains(lower, "abuse") {
		return pick(after, hasAfter, t.backoff(attempt)), "secondary rate limit", true
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			if d := time.Until(time.Unix(reset, 0)); d <= maxRateLimitWait {
				return max(d, 0) + time.Second, "rate limit", true
			}
		}
	}
	return 0, "", false
}

func pick(after time.Duration, ok bool, backoff time.Duration) time.Duration {
	if ok {
		return after
	}
	return backoff
}

// retryAfter reads a Retry-After header in seconds.
func retryAfter(h http.Header) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}
