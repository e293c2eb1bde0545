package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
)

// natsContext is a context of the nats CLI (ADR-21: one JSON file per
// context in $XDG_CONFIG_HOME/nats/context/, the selected one named in
// $XDG_CONFIG_HOME/nats/context.txt), so an operator who already uses
// `nats --context` needs no cuecast-specific flags. Only the fields that
// configure a connection are read.
type natsContext struct {
	name        string
	URL         string `json:"url"`
	Token       string `json:"token"`
	User        string `json:"user"`
	Password    string `json:"password"`
	Creds       string `json:"creds"`
	NKey        string `json:"nkey"`
	Cert        string `json:"cert"`
	Key         string `json:"key"`
	CA          string `json:"ca"`
	NSC         string `json:"nsc"`
	InboxPrefix string `json:"inbox_prefix"`
	UserJWT     string `json:"user_jwt"`
	TLSFirst    bool   `json:"tls_first"`
}

// natsConfigDir is the nats CLI's configuration directory.
func natsConfigDir(env *Env) string {
	if d := env.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "nats")
	}
	if h := env.Getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "nats")
	}
	return ""
}

// selectedContext is the context named by $NATS_CONTEXT, else the one the
// nats CLI has selected (`nats context select`), else none (nil, nil). A
// named context that cannot be read is an error.
func selectedContext(env *Env) (*natsContext, error) {
	if env == nil || env.Getenv == nil {
		return nil, nil
	}
	dir := natsConfigDir(env)
	name := env.Getenv("NATS_CONTEXT")
	if name == "" {
		if dir == "" {
			return nil, nil
		}
		b, err := os.ReadFile(filepath.Join(dir, "context.txt"))
		if err != nil {
			return nil, nil // no context selected: nothing to honour
		}
		if name = strings.TrimSpace(string(b)); name == "" {
			return nil, nil
		}
	}
	if dir == "" || strings.ContainsAny(name, `/\`) {
		return nil, usageErrorf("name a context from 'nats context ls'", "nats context %q: not found (no $HOME or $XDG_CONFIG_HOME)", name)
	}
	path := filepath.Join(dir, "context", name+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("name a context from 'nats context ls', or unset $NATS_CONTEXT", "nats context %q: %v", name, err)
	}
	c := &natsContext{name: name}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, usageErrorf("fix it with 'nats context edit "+name+"'", "nats context %s: %v", path, err)
	}
	if c.NSC != "" {
		return nil, usageErrorf("give the context creds and url instead of nsc", "nats context %q uses nsc, which cuecast does not run", name)
	}
	home := env.Getenv("HOME")
	for _, p := range []*string{&c.Creds, &c.NKey, &c.Cert, &c.Key, &c.CA} {
		if rest, ok := strings.CutPrefix(*p, "~/"); ok && home != "" {
			*p = filepath.Join(home, rest)
		}
	}
	return c, nil
}

// options are the context's connection settings that no flag or
// environment variable of cuecast's already set: those win.
func (c *natsContext) options(f *ConnFlags) ([]nats.Option, error) {
	var opts []nats.Option
	if f.Creds == "" && f.User == "" {
		switch {
		case c.Creds != "":
			opts = append(opts, nats.UserCredentials(c.Creds))
		case c.User != "":
			opts = append(opts, nats.UserInfo(c.User, c.Password))
		case c.NKey != "":
			o, err := nats.NkeyOptionFromSeed(c.NKey)
			if err != nil {
				return nil, &UsageError{Err: fmt.Errorf("nats context %q: nkey: %w", c.name, err)}
			}
			opts = append(opts, o)
		case c.UserJWT != "":
			return nil, usageErrorf("give the context a creds file", "nats context %q: user_jwt without a creds file is not supported", c.name)
		case c.Token != "":
			opts = append(opts, nats.Token(c.Token))
		}
	}
	if f.TLSCert == "" && c.Cert != "" {
		if c.Key == "" {
			return nil, &UsageError{Err: errors.New("nats context " + c.name + ": cert without key")}
		}
		opts = append(opts, nats.ClientCert(c.Cert, c.Key))
	}
	if f.TLSCA == "" && c.CA != "" {
		opts = append(opts, nats.RootCAs(c.CA))
	}
	if c.TLSFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	if c.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	return opts, nil
}
