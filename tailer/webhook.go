package tailer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
)

// maxWebhookBody caps what the webhook reads. A push only wakes the tailer,
// which reads the branch itself, so nothing in a large payload is needed; a
// push whose payload is larger (thousands of commits at once) is refused and
// found by the next poll instead. The signature covers the whole body, so it
// can only be checked after reading it: the cap bounds what an unsigned
// sender makes serve hold (BENCHMARKS.md, "Webhook body cap").
const maxWebhookBody = 1 << 20

// rememberedDeliveries is how many recent deliveries the webhook remembers
// to refuse replays.
const rememberedDeliveries = 4096

// WebhookHandler returns the handler for GitHub webhooks (`serve` mounts it
// at /hooks/github). A request must be a POST carrying an
// X-Hub-Signature-256 header; without one it gets 401 before its body is
// read. Events other than "push" and "ping" get 204 unread. A push or ping
// declaring a body over 1 MiB gets 413 unread (a body that turns out larger
// gets 413 after 1 MiB). The header must be "sha256=" and the hex
// HMAC-SHA256 of the body under secret, else 401. A verified "push" to w's
// branch (or any push when the payload names no ref) calls w.Wake and gets
// 202; to another branch 204; "ping" 204. A push whose X-GitHub-Delivery or
// signature was seen among the last 4096 deliveries is a replay: 409, and
// nothing is woken. An empty secret rejects every POST with 403 saying no
// secret is configured on this serve: an unauthenticated endpoint that makes
// the server fetch is not offered.
// Rejections are logged through the tailer's logger when w is a *Tailer.
func WebhookHandler(secret string, w Waker) http.Handler {
	log := slog.New(slog.DiscardHandler)
	if t, ok := w.(*Tailer); ok {
		log = t.log
	}
	seen := newRecent(rememberedDeliveries)
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			rw.Header().Set("Allow", http.MethodPost)
			http.Error(rw, "POST only", http.StatusMethodNotAllowed)
			return
		}
		event, delivery := r.Header.Get("X-GitHub-Event"), r.Header.Get("X-GitHub-Delivery")
		sigHeader := r.Header.Get("X-Hub-Signature-256")
		if secret == "" {
			// The sender may be right: say what is wrong here, so whoever reads
			// GitHub's delivery log fixes the serve and not the hook.
			log.Warn("webhook rejected: no webhook secret is configured on this serve", "remote", r.RemoteAddr, "event", event, "delivery", delivery)
			http.Error(rw, "webhooks are off: no webhook secret is configured on this serve (--webhook-secret or $CUECAST_WEBHOOK_SECRET); the tailer still polls", http.StatusForbidden)
			return
		}
		if sigHeader == "" {
			log.Warn("webhook rejected: no signature", "remote", r.RemoteAddr, "event", event, "delivery", delivery)
			http.Error(rw, "missing X-Hub-Signature-256", http.StatusUnauthorized)
			return
		}
		if event != "push" && event != "ping" {
			rw.WriteHeader(http.StatusNoContent) // nothing to do: not worth reading
			return
		}
		if r.ContentLength > maxWebhookBody {
			log.Warn("webhook rejected: payload too large; the next poll finds the push", "remote", r.RemoteAddr,
				"event", event, "delivery", delivery, "bytes", r.ContentLength)
			http.Error(rw, "payload over 1 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxWebhookBody))
		if err != nil {
			http.Error(rw, "read body: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		if !validSignature(secret, sigHeader, body) {
			log.Warn("webhook rejected: bad signature", "remote", r.RemoteAddr, "event", event, "delivery", delivery)
			http.Error(rw, "bad X-Hub-Signature-256", http.StatusUnauthorized)
			return
		}
		if event != "push" {
			rw.WriteHeader(http.StatusNoContent)
			return
		}
		// The signature covers only the body, so a replay may come with a
		// fresh delivery ID: both are remembered.
		if !seen.addAll("sig:"+sigHeader, "id:"+delivery) {
			log.Warn("webhook rejected: replayed delivery", "remote", r.RemoteAddr, "delivery", delivery)
			http.Error(rw, "delivery already received", http.StatusConflict)
			return
		}
		var push struct {
			Ref string `json:"ref"`
		}
		_ = json.Unmarshal(body, &push) // a payload we cannot read still wakes: polling is harmless
		if b, ok := w.(interface{ Branch() string }); ok && push.Ref != "" && push.Ref != "refs/heads/"+b.Branch() {
			rw.WriteHeader(http.StatusNoContent)
			return
		}
		log.Debug("webhook: push, waking the tailer", "ref", push.Ref, "delivery", delivery)
		w.Wake()
		rw.WriteHeader(http.StatusAccepted)
	})
}

// recent is a bounded set of strings; the oldest is forgotten first.
type recent struct {
	mu    sync.Mutex
	set   map[string]bool
	order []string
	next  int
}

func newRecent(n int) *recent {
	return &recent{set: make(map[string]bool, n), order: make([]string, n)}
}

// addAll records keys and reports whether none was known; when one was,
// nothing is recorded. An empty key (a key prefix with nothing after the
// colon) is skipped.
func (r *recent) addAll(keys ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if r.set[k] {
			return false
		}
	}
	for _, k := range keys {
		if strings.HasSuffix(k, ":") {
			continue
		}
		if old := r.order[r.next]; old != "" {
			delete(r.set, old)
		}
		r.order[r.next] = k
		r.next = (r.next + 1) % len(r.order)
		r.set[k] = true
	}
	return true
}

// Waker is what a webhook wakes; *Tailer is one.
type Waker interface{ Wake() }

// Branch is the branch the tailer follows.
func (t *Tailer) Branch() string { return t.cfg.Branch }

func validSignature(secret, header string, body []byte) bool {
	if secret == "" {
		return false
	}
	sig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}
