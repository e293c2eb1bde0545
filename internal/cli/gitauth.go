package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
)

// GitCredentials is how serve logs in to a private config repository: a
// token over https, or an SSH deploy key checked against known_hosts. The
// token is never a flag value (it would show in ps and shell history): a
// file, or the environment.
type GitCredentials struct {
	TokenFile  string // --git-token-file; default $CUECAST_GIT_TOKEN
	User       string // --git-user: the https user name the token goes with
	SSHKey     string // --git-ssh-key: a private key file (passphrase $CUECAST_GIT_SSH_PASSPHRASE)
	KnownHosts string // --git-known-hosts; default $SSH_KNOWN_HOSTS, then ~/.ssh/known_hosts
	CAFile     string // --git-ca: PEM certificates for an https server behind a private CA
}

func (g *GitCredentials) flags(fs interface {
	StringVar(p *string, name, value, usage string)
}) {
	fs.StringVar(&g.TokenFile, "git-token-file", "", "file holding a token for an https --repo (default $CUECAST_GIT_TOKEN; never pass a token as a flag)")
	fs.StringVar(&g.User, "git-user", "x-access-token", "https user name the token logs in as (GitHub: x-access-token; GitLab: oauth2)")
	fs.StringVar(&g.SSHKey, "git-ssh-key", "", "SSH private key (a deploy key) for an ssh --repo; passphrase in $CUECAST_GIT_SSH_PASSPHRASE")
	fs.StringVar(&g.KnownHosts, "git-known-hosts", "", "known_hosts file the ssh --repo's host key must be in (default $SSH_KNOWN_HOSTS, then ~/.ssh/known_hosts)")
	fs.StringVar(&g.CAFile, "git-ca", "", "PEM file of CA certificates for an https --repo behind a private CA")
}

// auth returns the transport authentication and CA bundle for repo, or a
// usage error naming what does not fit: a credential for another kind of
// URL, an unreadable file, an ssh key without a known_hosts to check the
// server against (serve never skips the host key check).
func (g *GitCredentials) auth(repo string, getenv func(string) string) (transport.AuthMethod, []byte, error) {
	ep, err := transport.NewEndpoint(repo)
	proto := ""
	if err == nil && (strings.Contains(repo, "://") || strings.Contains(repo, "@")) {
		proto = ep.Protocol
	}
	https := proto == "https" || proto == "http"
	var ca []byte
	if g.CAFile != "" {
		if !https {
			return nil, nil, usageErrorf("--git-ca is for an https --repo", "--git-ca %s: --repo %s is not an https URL", g.CAFile, repo)
		}
		if ca, err = os.ReadFile(g.CAFile); err != nil {
			return nil, nil, usageErrorf("pass a readable PEM file", "--git-ca: %v", err)
		}
	}
	if g.SSHKey != "" && g.TokenFile != "" {
		return nil, nil, usageErrorf("pass the one that fits --repo", "--git-ssh-key and --git-token-file are two ways to log in; pass one")
	}
	switch {
	case g.TokenFile != "":
		if !https {
			return nil, nil, usageErrorf("a token is for an https --repo; use --git-ssh-key for ssh", "--git-token-file: --repo %s is not an https URL", repo)
		}
		b, err := os.ReadFile(g.TokenFile)
		if err != nil {
			return nil, nil, usageErrorf("pass a readable file holding the token", "--git-token-file: %v", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return nil, nil, usageErrorf("write the token into the file", "--git-token-file %s is empty", g.TokenFile)
		}
		return &githttp.BasicAuth{Username: g.User, Password: tok}, ca, nil
	case g.SSHKey != "":
		if proto != "ssh" {
			return nil, nil, usageErrorf("a deploy key is for an ssh --repo (ssh://… or git@host:path); use --git-token-file for https", "--git-ssh-key: --repo %s is not an ssh URL", repo)
		}
		user := ep.User
		if user == "" {
			user = "git"
		}
		keys, err := gitssh.NewPublicKeysFromFile(user, g.SSHKey, getenv("CUECAST_GIT_SSH_PASSPHRASE"))
		if err != nil {
			return nil, nil, usageErrorf("pass a private key file (ssh-keygen writes one); its passphrase goes in $CUECAST_GIT_SSH_PASSPHRASE", "--git-ssh-key %s: %v", g.SSHKey, err)
		}
		known := []string{}
		if g.KnownHosts != "" {
			known = append(known, g.KnownHosts)
		}
		cb, err := gitssh.NewKnownHostsCallback(known...)
		if err != nil {
			return nil, nil, usageErrorf("pass --git-known-hosts with the server's host key (ssh-keyscan HOST, checked against what the Git host publishes)",
				"no known_hosts to check %s's host key against: %v", ep.Host, err)
		}
		keys.HostKeyCallback = cb
		return keys, ca, nil
	case https:
		if tok := strings.TrimSpace(getenv("CUECAST_GIT_TOKEN")); tok != "" {
			return &githttp.BasicAuth{Username: g.User, Password: tok}, ca, nil
		}
	}
	return nil, ca, nil
}

// describe names the credentials for an error message.
func (g *GitCredentials) describe(getenv func(string) string) string {
	switch {
	case g.TokenFile != "":
		return fmt.Sprintf("the token in %s (user %s)", g.TokenFile, g.User)
	case g.SSHKey != "":
		return "the key " + g.SSHKey
	case getenv("CUECAST_GIT_TOKEN") != "":
		return fmt.Sprintf("the token in $CUECAST_GIT_TOKEN (user %s)", g.User)
	}
	return "no credentials (pass --git-token-file for https or --git-ssh-key for ssh)"
}
