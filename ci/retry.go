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
	"sync"
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
//
// A POST creates something, so it is retried only on answers that say it
// was not carried out (rate limits); after a 5xx or a lost connection the
// caller looks up what it meant to create first (GitHub.Start, Comment).
//
// Mutating requests are spaced at least interval apart, as GitHub's REST
// guidance asks.
type retryTransport struct {
	base     http.RoundTripper
	attempts int
	backoff  func(retry int) time.Duration
	sleep    func(ctx context.Context, d time.Duration) error
	log      *slog.Logger
	now      func() time.Time
	interval time.Duration

	mu           sync.Mutex
	lastMutation time.Time
}

// pace waits until interval has passed since the last mutating request.
// The CLI sends one request at a time, so holding the lock while waiting
// only orders concurrent callers.
func (t *retryTransport) pace(req *http.Request) error {
	switch req.Method {
	case http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete:
	default:
		return nil
	}
	if t.interval <= 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.lastMutation.IsZero() {
		if d := t.lastMutation.Add(t.interval).Sub(t.now()); d > 0 {
			if err := t.sleep(req.Context(), d); err != nil {
				return fmt.Errorf("wait to send %s %s: %w", req.Method, req.URL.Path, err)
			}
		}
	}
	t.lastMutation = t.now()
	return nil
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	create := req.Method == http.MethodPost
	for attempt := 1; ; attempt++ {
		if err := t.pace(req); err != nil {
			return nil, err
		}
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
			if create || ctx.Err() != nil || attempt >= t.attempts || (req.Body != nil && req.GetBody == nil) {
				return nil, err
			}
			wait, why = t.backoff(attempt), err.Error()
		default:
			var retry bool
			wait, why, retry = t.retryable(resp, attempt)
			if create && resp.StatusCode >= 500 {
				retry = false
			}
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
