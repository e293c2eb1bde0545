package cli

import (
	"fmt"
	"os"
	"os/user"

	"github.com/go-git/go-git/v5/config"
)

// actor names the person acting, for the audit stream: $CUECAST_ACTOR, then
// the Git identity ("Ann <ann@example.com>" from the global Git config),
// then $USER or $USERNAME, then the operating system's account with the host
// ("root@build-7"), which answers where $USER is unset: root shells, CI jobs,
// containers. It never falls back to a made-up name: with none of these it
// is a usage error asking for --as.
func actor(env *Env) (string, error) {
	if v := env.Getenv("CUECAST_ACTOR"); v != "" {
		return v, nil
	}
	if name, email := gitIdentity(env); name != "" {
		if email == "" {
			return name, nil
		}
		return fmt.Sprintf("%s <%s>", name, email), nil
	}
	for _, k := range []string{"USER", "USERNAME"} {
		if v := env.Getenv(k); v != "" {
			return v, nil
		}
	}
	if v := osAccount(); v != "" {
		return v, nil
	}
	return "", usageErrorf("pass --as NAME, or set $CUECAST_ACTOR", "cannot tell who is acting: no $CUECAST_ACTOR, Git identity, $USER or operating-system account")
}

// resolveActor fills an empty --as from actor, for every command that
// writes to the audit trail.
func resolveActor(env *Env, as *string) error {
	if *as != "" {
		return nil
	}
	a, err := actor(env)
	*as = a
	return err
}

// gitIdentity reads user.name and user.email from the global Git config
// ($HOME/.gitconfig and $XDG_CONFIG_HOME/git/config), as git commit does.
func gitIdentity(env *Env) (name, email string) {
	if env.Getenv("HOME") == "" && env.Getenv("XDG_CONFIG_HOME") == "" {
		return "", "" // the process's home is not this invocation's
	}
	cfg, err := config.LoadConfig(config.GlobalScope)
	if err != nil {
		return "", ""
	}
	return cfg.User.Name, cfg.User.Email
}

// osAccount is the current account's name with the host, "" when neither
// can be found.
func osAccount() string {
	u, err := user.Current()
	if err != nil || u.Username == "" {
		return ""
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return u.Username
	}
	return u.Username + "@" + host
}
