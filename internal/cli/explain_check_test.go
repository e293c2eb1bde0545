package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/githubtest"
	"github.com/cuecast/cuecast/internal/gittest"
)

// The pull request comment ends with where each changed value comes from.
func TestCheckGitHubOrigins(t *testing.T) {
	t.Parallel()
	r := gittest.New(t)
	r.CopyDir(filepath.Join(repoRoot(t), "configs-example"))
	base := r.Commit("base")
	r.Edit("payments/checkout/checkout.cue", `"EUR"`, `"USD"`)
	head := r.Commit("checkout in dollars")
	event := filepath.Join(t.TempDir(), "event.json")
	payload := `{"action":"opened","number":5,"pull_request":{"number":5,"head":{"sha":"` + head + `"},"base":{"sha":"` + base + `"}}}`
	if err := os.WriteFile(event, []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	gh := githubtest.New(t)
	env := map[string]string{
		"GITHUB_TOKEN": githubtest.Token, "GITHUB_REPOSITORY": "acme/configs", "GITHUB_EVENT_PATH": event, "GITHUB_API_URL": gh.URL,
	}
	code, _, stderr := runCLI(t, env, "check", "--repo", r.Dir, "--github", "--log-level", "warn")
	if code != cli.ExitOK {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, cli.ExitOK, stderr)
	}
	cs := gh.Comments(5)
	if len(cs) != 1 {
		t.Fatalf("got %d comments, want 1", len(cs))
	}
	for _, want := range []string{"### Where the changed values come from", `currency = "USD"  literal  payments/checkout/checkout.cue:19:19`} {
		if !strings.Contains(cs[0].Body, want) {
			t.Errorf("comment lacks %q:\n%s", want, cs[0].Body)
		}
	}
}
