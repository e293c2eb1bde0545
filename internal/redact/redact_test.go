package redact

import "testing"

func TestURLs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://ops:pw@127.0.0.1:4222", "nats://***@127.0.0.1:4222"},
		{"nats://token@127.0.0.1:4222", "nats://***@127.0.0.1:4222"},
		{"nats://a:1@h1:4222,nats://h2:4222,tls://b:2@h3", "nats://***@h1:4222,nats://h2:4222,tls://***@h3"},
		{"https://x-access-token:ghs_abc@github.com/o/r.git", "https://***@github.com/o/r.git"},
		{"https://github.com/o/r.git?ref=a@b", "https://github.com/o/r.git?ref=a@b"},
		{"git@github.com:o/r.git", "git@github.com:o/r.git"},
		{"u:p@host:1", "***@host:1"},
		{"", ""},
	} {
		if got := URLs(c.in); got != c.want {
			t.Errorf("URLs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
