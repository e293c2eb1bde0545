package ci_test

import (
	"testing"

	"github.com/cuecast/cuecast/ci"
)

func TestParseGitHubRepo(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://github.com/acme/configs.git", "acme/configs"},
		{"https://github.com/acme/configs", "acme/configs"},
		{"git@github.com:acme/configs.git", "acme/configs"},
		{"git@github.com:acme/configs", "acme/configs"},
		{"deploy@github.com:acme/configs.git", "acme/configs"},
		{"ssh://git@github.com/acme/configs.git", "acme/configs"},
		{"ssh://git@github.com:22/acme/configs.git", "acme/configs"},
		{"https://GitHub.com/acme/configs/", "acme/configs"},
		{"https://gitlab.com/acme/configs.git", ""},
		{"https://github.com/acme", ""},
		{"https://github.com/acme/configs/tree/main", ""},
		{"git@github.com:acme", ""},
		{"/srv/git/configs", ""},
		{"/srv/x@github.com:acme/configs", ""},
		{"file:///srv/git/configs", ""},
	} {
		owner, name, ok := ci.ParseGitHubRepo(c.in)
		got := owner + "/" + name
		if !ok {
			got = ""
		}
		if got != c.want || ok != (c.want != "") {
			t.Errorf("ParseGitHubRepo(%q) = %q, %t; want %q", c.in, got, ok, c.want)
		}
	}
}
