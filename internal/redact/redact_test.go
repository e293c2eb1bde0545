package redact

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestURLs: a password or token never survives, parsed or not, in a list
// or alone.
func TestURLs(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                          "nats://127.0.0.1:4222",
		"nats://ops:pw@127.0.0.1:4222":                   "nats://ops:***@127.0.0.1:4222",
		"nats://token@127.0.0.1:4222":                    "nats://***@127.0.0.1:4222",
		"nats://a:1@h1:4222,nats://h2:4222,tls://b:2@h3": "nats://a:***@h1:4222,nats://h2:4222,tls://b:***@h3",
		"https://x-access-token:ghs_abc@github.com/o/r":  "https://x-access-token:***@github.com/o/r",
		"https://ghs_abc@github.com/o/r.git":             "https://***@github.com/o/r.git",
		"https://github.com/o/r.git?ref=a@b":             "https://github.com/o/r.git?ref=a@b",
		"git@github.com:o/r.git":                         "git@github.com:o/r.git",
		"http://prometheus:9090":                         "http://prometheus:9090",
		"http://promuser:S3cretPW@127.0.0.1:1":           "http://promuser:***@127.0.0.1:1",
		"https://u:p@ss@prom.example/api?x=@":            "https://u:***@prom.example/api?x=@",
		"http://promuser:S3cretPW@127.0.0.1:notaport/a@": "http://promuser:***@127.0.0.1:notaport/a@",
		"promuser:S3cretPW@prometheus:9090":              "promuser:***@prometheus:9090",
		"":                                               "",
	} {
		if got := URLs(in); got != want {
			t.Errorf("URLs(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestError: an error quoting a URL loses the URL's secrets, in every place
// its text has them, and still wraps what it wrapped.
func TestError(t *testing.T) {
	base := errors.New("boom")
	for _, tt := range []struct{ url, text, want string }{
		{"https://ghs_abc@github.com/o/r.git", `Get "https://ghs_abc@github.com/o/r.git/info/refs": boom`, `Get "https://***@github.com/o/r.git/info/refs": boom`},
		{"https://x-access-token:ghs_abc@github.com/o/r", "fetch https://x-access-token:ghs_abc@github.com/o/r: boom", "fetch https://x-access-token:***@github.com/o/r: boom"},
		{"nats://a:1pw@h1:4222,nats://tok@h2", "dial nats://a:1pw@h1:4222 and nats://tok@h2: boom", "dial nats://a:***@h1:4222 and nats://***@h2: boom"},
		{"git@github.com:o/r.git", "ssh git@github.com:o/r.git: boom", "ssh git@github.com:o/r.git: boom"},
		{"/srv/configs", "open /srv/configs: boom", "open /srv/configs: boom"},
	} {
		err := Error(fmt.Errorf("%s: %w", strings.TrimSuffix(tt.text, ": boom"), base), tt.url)
		if err.Error() != tt.want || !errors.Is(err, base) {
			t.Errorf("Error(%q) = %q (wraps boom: %t), want %q", tt.url, err, errors.Is(err, base), tt.want)
		}
	}
	if Error(nil, "https://tok@h") != nil {
		t.Error("Error(nil) is not nil")
	}
}
