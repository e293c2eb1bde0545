package cli_test

import (
	"context"
	"strings"
	"testing"
)

// TestNATSURLSecretsNotPrinted: a --nats URL may carry a login (nats://user:password@host)
// or a token (nats://token@host). A command that cannot connect says where it tried,
// and must not print either: its output ends up in CI logs and terminals.
func TestNATSURLSecretsNotPrinted(t *testing.T) {
	repo := exampleRepo(t)
	const password, token = "S3cretPW", "S3cretTOKEN"
	for _, url := range []string{
		"nats://ops:" + password + "@127.0.0.1:1",
		"nats://" + token + "@127.0.0.1:1",
		"nats://127.0.0.1:2,nats://ops:" + password + "@127.0.0.1:1",
	} {
		for _, args := range [][]string{
			{"log", "payments/checkout", "--nats", url},
			{"rollout", "status", "payments/checkout", "--nats", url},
			{"check", "--repo", repo.Dir, "--base", "HEAD", "--head", "HEAD", "--fleet", "--nats", url},
		} {
			code, stdout, stderr := run(context.Background(), args...)
			out := stdout.String() + stderr.String()
			if code == 0 {
				t.Errorf("%q: exit 0 with no server to reach", args)
			}
			if strings.Contains(out, password) || strings.Contains(out, token) {
				t.Errorf("%q printed the URL's secret:\n%s", args, out)
			}
			if !strings.Contains(out, "127.0.0.1:1") {
				t.Errorf("%q does not say where it tried:\n%s", args, out)
			}
		}
	}
}
