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
)

// maxWebhookBody is GitHub's own cap on a webhook payload.
const maxWebhookBody = 25 << 20

// WebhookHandler returns the handler for GitHub webhooks (`serve` mounts it
// at /hooks/github). A request must be a POST whose X-Hub-Signature-256
// header is "sha256=" and the hex HMAC-SHA256 of the body under secret;
// anything else gets 401 and wakes nothing. A verified "push" event to
// w's branch (or any push when the payload names no ref) calls w.Wake and
// gets 202; "ping" and other events get 204. An empty secret rejects every
// request: an unauthenticated endpoint that makes the server fetch is not
// offered. Rejections are logged through the tailer's logger when w is a
// *Tailer.
func WebhookHandler(secret string, w Waker) http.Handler {
	log := slog.New(slog.DiscardHandler)
	if t, ok := w.(*Tailer); ok {
		log = t.log
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			rw.Header().Set("Allow", http.MethodPost)
			http.Error(rw, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxWebhookBody))
		if err != nil {
			http.Error(rw, "read body: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		if !validSignature(secret, r.Header.Get("X-Hub-Signature-256"), body) {
			log.Warn("webhook rejected: bad or missing signature", "remote", r.RemoteAddr,
				"event", r.Header.Get("X-GitHub-Event"), "delivery", r.Header.Get("X-GitHub-Delivery"))
			http.Error(rw, "bad or missing X-Hub-Signature-256", http.StatusUnauthorized)
			return
		}
		event := r.Header.Get("X-GitHub-Event")
		if event != "push" {
			rw.WriteHeader(http.StatusNoContent)
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
		log.Debug("webhook: push, waking the tailer", "ref", push.Ref, "delivery", r.Header.Get("X-GitHub-Delivery"))
		w.Wake()
		rw.WriteHeader(http.StatusAccepted)
	})
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
