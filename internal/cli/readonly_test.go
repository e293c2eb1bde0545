package cli_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/natstest"
)

// TestReadCommandsDialAlike: every command that reads or steers serve's
// streams (status, log, flags eval --published, rollout, rollback, check
// --fleet) dials --nats one way, so one that reaches no server says so the
// same way.
func TestReadCommandsDialAlike(t *testing.T) {
	t.Parallel()
	// A port nothing listens on: port 1, privileged, which no test's server
	// asks for. A port closed after listening on it could go to another
	// test's server meanwhile, and did (its Authorization Violation, not
	// "connection refused", in a .ci/run, 12-08).
	url := "nats://127.0.0.1:1"
	for _, args := range [][]string{
		{"status", "--nats", url},
		{"log", "payments/checkout", "--nats", url},
		{"flags", "eval", "payments/flags", "checkout-v2", "--published", "--nats", url, "--ctx", "targetingKey=user-1"},
		{"rollout", "status", "--nats", url},
		{"rollback", "payments/checkout", "--previous", "--reason", "test", "--nats", url},
		{"check", "--repo", t.TempDir(), "--base", "main", "--head", "HEAD", "--fleet", "--nats", url},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := run(context.Background(), args...)
			want := "connect " + url + ": "
			if code != cli.ExitFailure || !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "(is `cuecast serve` running?)") {
				t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, %q and whether serve is running",
					args, code, stdout, stderr, cli.ExitFailure, want)
			}
		})
	}
}

// TestReadCommandsCreateNothing: a command that reads or steers (status,
// log, flags eval --published, rollout, rollback) pointed at a NATS server that serve has not set
// up says so and leaves the server as it found it. They used to create
// serve's streams there, with their default configuration, on whatever
// server --nats named.
func TestReadCommandsCreateNothing(t *testing.T) {
	s := natstest.Start(t)
	url := s.ClientURL()
	js := natstest.JetStream(t, s.Connect(t))
	for _, args := range [][]string{
		{"status", "--nats", url},
		{"status", "payments/checkout", "--nats", url},
		{"log", "payments/checkout", "--nats", url},
		{"flags", "eval", "payments/flags", "checkout-v2", "--published", "--nats", url, "--ctx", "targetingKey=user-1"},
		{"rollout", "status", "--nats", url},
		{"rollback", "payments/checkout", "--previous", "--reason", "test", "--nats", url},
		// accept-rewrite opened the tailer as serve does, creating CUECAST,
		// CUECAST_REPORTS and the tailer's bucket, then said "not halted".
		{"tailer", "accept-rewrite", "--to", "3f2a9c1", "--repo", t.TempDir(), "--nats", url},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			code, stdout, stderr := run(context.Background(), args...)
			if code != cli.ExitFailure || !strings.Contains(stderr.String(), "has no cuecast streams") {
				t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d saying the server has no cuecast streams",
					args, code, stdout, stderr, cli.ExitFailure)
			}
			if names := streamNames(t, js); len(names) != 0 {
				t.Fatalf("%s created streams %v on a server serve never set up", args, names)
			}
		})
	}
}

// TestReadCommandsCreateNoRolloutState: where serve's streams exist but its
// rollout state does not (a serve that never started its controller), status
// reads "no rollouts" and rollout and rollback say what is missing; none of
// them creates the rollout bucket or the audit stream, which are serve's.
// status and rollout used to create both, with their default configuration.
func TestReadCommandsCreateNoRolloutState(t *testing.T) {
	s := natstest.Start(t)
	url := s.ClientURL()
	nc := s.Connect(t)
	if _, err := distributor.New(t.Context(), nc, distributor.Options{}); err != nil {
		t.Fatal(err)
	}
	js := natstest.JetStream(t, nc)
	before := streamNames(t, js)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"status", "--nats", url}, 0, ""},
		{[]string{"rollout", "status", "--nats", url}, cli.ExitFailure, "no rollout state"},
		{[]string{"rollback", "payments/checkout", "--previous", "--reason", "test", "--nats", url}, cli.ExitFailure, "no rollout state"},
		{[]string{"tailer", "accept-rewrite", "--to", "3f2a9c1", "--repo", t.TempDir(), "--nats", url}, cli.ExitUsage, "no tailer has run against this NATS server"},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			code, stdout, stderr := run(context.Background(), tc.args...)
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, stdout, stderr, tc.code, tc.want)
			}
			if after := streamNames(t, js); !slices.Equal(after, before) {
				t.Fatalf("%s: streams %v, were %v", tc.args, after, before)
			}
		})
	}
}

// streamNames lists the server's streams, sorted.
func streamNames(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	var names []string
	l := js.StreamNames(t.Context())
	for n := range l.Name() {
		names = append(names, n)
	}
	if l.Err() != nil {
		t.Fatal(l.Err())
	}
	slices.Sort(names)
	return names
}
