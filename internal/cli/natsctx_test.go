package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/natstest"
)

func writeContext(t *testing.T, home, name, body string, selected bool) {
	t.Helper()
	dir := filepath.Join(home, ".config", "nats", "context")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if selected {
		if err := os.WriteFile(filepath.Join(home, ".config", "nats", "context.txt"), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNATSContextFillsWhatFlagsLeave: the nats CLI's selected context (or
// $NATS_CONTEXT) gives the URL and the login; flags and cuecast's variables
// win over it (issue 17, item 6).
func TestNATSContextFillsWhatFlagsLeave(t *testing.T) {
	home := t.TempDir()
	writeContext(t, home, "prod", `{"url":"nats://prod:4222","user":"ann","password":"s3cret","inbox_prefix":"_INBOX_ops"}`, true)
	writeContext(t, home, "ci", `{"url":"nats://ci:4222","creds":"~/ci.creds"}`, false)
	writeContext(t, home, "broken", `{"url":`, false)
	writeContext(t, home, "nsc", `{"nsc":"nsc://op/acct/user"}`, false)
	if err := os.WriteFile(filepath.Join(home, "ci.creds"), []byte("placeholder: read only when connecting\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	apply := func(t *testing.T, opts []nats.Option) nats.Options {
		o := nats.GetDefaultOptions()
		for _, f := range opts {
			if err := f(&o); err != nil {
				t.Fatal(err)
			}
		}
		return o
	}
	for _, tt := range []struct {
		name    string
		env     map[string]string
		flags   ConnFlags
		url     string
		user    string
		inbox   string
		wantErr string
	}{
		{"the selected context", map[string]string{"HOME": home}, ConnFlags{}, "nats://prod:4222", "ann", "_INBOX_ops", ""},
		{"NATS_CONTEXT picks another", map[string]string{"HOME": home, "NATS_CONTEXT": "ci"}, ConnFlags{}, "nats://ci:4222", "", "", ""},
		{"NATS_URL and --user win", map[string]string{"HOME": home, "NATS_URL": "nats://mine:4222", "CUECAST_NATS_PASSWORD": "pw"},
			ConnFlags{User: "bob"}, "nats://mine:4222", "bob", "_INBOX_ops", ""},
		{"no context at all", map[string]string{"HOME": t.TempDir()}, ConnFlags{}, nats.DefaultURL, "", "", ""},
		{"a named context that does not exist", map[string]string{"HOME": home, "NATS_CONTEXT": "nope"}, ConnFlags{}, nats.DefaultURL, "", "", `nats context "nope"`},
		{"an unreadable context", map[string]string{"HOME": home, "NATS_CONTEXT": "broken"}, ConnFlags{}, nats.DefaultURL, "", "", "nats context"},
		{"nsc is refused", map[string]string{"HOME": home, "NATS_CONTEXT": "nsc"}, ConnFlags{}, nats.DefaultURL, "", "", "uses nsc"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := &Env{Getenv: func(k string) string { return tt.env[k] }}
			if got := defaultNATSURL(env); got != tt.url {
				t.Errorf("URL = %q, want %q", got, tt.url)
			}
			f := tt.flags
			opts, err := f.Options(env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Options: %v, want an error with %q", err, tt.wantErr)
				}
				if ExitCode(err) != ExitUsage {
					t.Errorf("exit %d, want %d (usage)", ExitCode(err), ExitUsage)
				}
				return
			}
			if err != nil {
				t.Fatalf("Options: %v", err)
			}
			o := apply(t, opts)
			if o.User != tt.user || o.InboxPrefix != tt.inbox {
				t.Errorf("user %q inbox %q, want %q %q", o.User, o.InboxPrefix, tt.user, tt.inbox)
			}
			if wantCreds := tt.env["NATS_CONTEXT"] == "ci"; (o.UserJWT != nil) != wantCreds {
				t.Errorf("credentials file used: %v, want %v", o.UserJWT != nil, wantCreds)
			}
		})
	}
}

// TestCommandsConnectThroughContext: a command with no --nats reaches the
// server the selected context names.
func TestCommandsConnectThroughContext(t *testing.T) {
	srv := natstest.Start(t)
	// serve's streams, as serve sets them up: status creates none.
	if _, err := distributor.New(t.Context(), srv.Connect(t), distributor.Options{}); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	writeContext(t, home, "local", `{"url":"`+srv.ClientURL()+`"}`, true)
	io, out, errOut := iostreams.Test()
	code := Main(t.Context(), []string{"status"}, io, func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	})
	if code != 0 || !strings.Contains(out.String(), "no configs published yet") {
		t.Errorf("status through the context: exit %d\n%s%s", code, out, errOut)
	}
}
