package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/flags/ofrep"
	"github.com/cuecast/cuecast/internal/hostcheck"
	"github.com/cuecast/cuecast/internal/httpsrv"
)

// validateOFREP checks --ofrep, --ofrep-tokens and --ofrep-insecure-local:
// the agent serves OFREP on loopback or a Unix socket only, so that flags
// leave the host only through the hub's own endpoint; and on loopback, which
// every user of the host can connect to, only with tokens unless told
// explicitly that the host's users may read every flag set it keeps.
func (o *AgentOptions) validateOFREP() error {
	if o.OFREP == "" {
		if o.OFREPTokens != "" {
			return usageErrorf("add --ofrep ADDR", "--ofrep-tokens needs --ofrep")
		}
		if o.OFREPInsecureLocal {
			return usageErrorf("add --ofrep 127.0.0.1:PORT", "--ofrep-insecure-local needs --ofrep")
		}
		return nil
	}
	if o.OFREPTokens != "" && o.OFREPInsecureLocal {
		return usageErrorf("pass one of them", "--ofrep-tokens and --ofrep-insecure-local both given")
	}
	if path, ok := strings.CutPrefix(o.OFREP, "unix:"); ok {
		if path == "" {
			return usageErrorf("write it as unix:/run/cuecast/ofrep.sock", "--ofrep %q: no socket path", o.OFREP)
		}
		if o.OFREPInsecureLocal {
			return usageErrorf("leave it out: the socket's mode (0660) decides who connects",
				"--ofrep-insecure-local is for a TCP --ofrep, not %q", o.OFREP)
		}
		return nil
	}
	host, _, err := net.SplitHostPort(o.OFREP)
	if err != nil {
		return usageErrorf("write it as 127.0.0.1:PORT or unix:PATH", "--ofrep %q: %v", o.OFREP, err)
	}
	if !hostcheck.IsLoopback(host) {
		return usageErrorf("serve OFREP on 127.0.0.1, [::1] or a Unix socket; other hosts use `cuecast serve --http`'s",
			"--ofrep %q is not a loopback address", o.OFREP)
	}
	if o.OFREPTokens == "" && !o.OFREPInsecureLocal {
		return usageErrorf("add --ofrep-tokens FILE (lines NAMESPACE TOKEN), serve on a Unix socket (unix:PATH, mode 0660), or accept it with --ofrep-insecure-local",
			"--ofrep %s without --ofrep-tokens would serve every flag set this agent keeps, of every namespace, to any user of this host", o.OFREP)
	}
	return nil
}

// agentOFREP serves the agent's flag sets over OFREP (docs/FLAGS.md,
// "Other languages"): each version the agent writes that is a flag set is
// compiled into the store as it is written, and any version written ends
// its config's wait for a first one (ofrep.Store.Pending).
type agentOFREP struct {
	log   *slog.Logger
	store *ofrep.Store
	srv   *httpsrv.Server
	ln    net.Listener
	sock  string // the socket's path, removed on stop; "" on TCP
}

// startOFREP listens on --ofrep and serves until stop; nil without --ofrep.
func (a *agent) startOFREP() (*agentOFREP, error) {
	if a.opts.OFREP == "" {
		return nil, nil
	}
	var tokens *ofrep.Tokens
	if a.opts.OFREPTokens != "" {
		var err error
		if tokens, err = ofrep.ReadTokensFile(a.opts.OFREPTokens); err != nil {
			return nil, &UsageError{Err: err, Hint: tokensHint(err, "one NAMESPACE TOKEN per line")}
		}
	}
	store := ofrep.NewStore()
	// OFREP opens before the watches deliver: until a config's first
	// version (from NATS or its last-known-good file), its keys would be
	// FLAG_NOT_FOUND and a bulk evaluation would lack its flags, which an
	// SDK takes for the truth. Per config, so that one that never comes (a
	// misspelt --config) holds up only its own keys and the bulk answer.
	// By base path, as apply stores a variant's set.
	for _, c := range a.opts.Configs {
		store.Pending(string(cuecast.ConfigPath(c).Base()))
	}
	h, err := ofrep.New(ofrep.Options{Store: store, Tokens: tokens})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	tcp := !strings.HasPrefix(a.opts.OFREP, "unix:")
	o := &agentOFREP{log: a.env.Logger(), store: store, srv: ofrepServer(h, httpsrv.Limits{}, tcp, a.env.Logger())}
	where := ""
	if path, ok := strings.CutPrefix(a.opts.OFREP, "unix:"); ok {
		if o.ln, err = listenSocket(path); err != nil {
			return nil, fmt.Errorf("agent: --ofrep %s: %w", a.opts.OFREP, err)
		}
		o.sock, where = path, a.opts.OFREP
	} else {
		if o.ln, err = net.Listen("tcp", a.opts.OFREP); err != nil {
			return nil, fmt.Errorf("agent: --ofrep %s: %w", a.opts.OFREP, err)
		}
		where = "http://" + o.ln.Addr().String()
	}
	go o.srv.Serve(o.ln)
	fmt.Fprintf(a.env.IO.ErrOut, "agent %s: OFREP at %s/ofrep/v1/ (%s)\n", a.opts.Instance, where, authWord(tokens != nil, o.sock != ""))
	return o, nil
}

// ofrepServer is the agent's OFREP server for h, under lim (zero: the
// defaults; tests shorten them). On TCP it answers only requests addressed
// to loopback (loopbackHost).
func ofrepServer(h http.Handler, lim httpsrv.Limits, tcp bool, log *slog.Logger) *httpsrv.Server {
	if tcp {
		h = loopbackHost(h)
	}
	return httpsrv.New(h, lim, log)
}

// loopbackHost answers 421 Misdirected Request, in OFREP's error JSON, to
// a request whose Host is not a loopback address or localhost. A web page
// whose name an attacker rebinds to 127.0.0.1 reaches the loopback port
// from a browser on the host, with its own name as Host, and a text/plain
// POST needs no CORS preflight: without this, an --ofrep-insecure-local
// agent's flags are the page's to read. A Unix socket is out of a
// browser's reach.
func loopbackHost(h http.Handler) http.Handler {
	return hostcheck.Guard(h, hostcheck.LoopbackOnly(), func(w http.ResponseWriter, r *http.Request, msg string) {
		ofrep.Error(w, r, http.StatusMisdirectedRequest, msg)
	})
}

// socketMode lets the agent's user and the socket's group connect (a Unix
// socket needs write permission to connect), and no one else.
const socketMode = 0o660

// listenSocket listens on a Unix socket at path with mode socketMode. The
// socket is made in a new directory beside path that only this user can
// enter (0700), restricted there, and renamed into place: connecting needs
// search permission on every directory of the path, so no other user can
// reach it while its mode is still the umask's. A socket already at path (an
// agent that did not stop cleanly) is replaced; any other file is not.
func listenSocket(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() != fs.ModeSocket {
		return nil, fmt.Errorf("%s exists and is not a socket (%v): remove it or choose another path", path, fi.Mode().Type())
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	private, err := os.MkdirTemp(filepath.Dir(path), ".ofrep-")
	if err != nil {
		return nil, fmt.Errorf("make the socket's private directory: %w", err)
	}
	defer os.RemoveAll(private)
	tmp := filepath.Join(private, "s")
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, err
	}
	// The listener's path changes with the rename: stop removes the socket
	// itself.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, socketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("move socket into place: %w", err)
	}
	return ln, nil
}

func authWord(tokens, socket bool) string {
	switch {
	case tokens:
		return "tokens required"
	case socket:
		return "no tokens: the socket's user and group (mode 0660) read every flag set"
	}
	return "no tokens (--ofrep-insecure-local): any user of this host reads every flag set"
}

// apply puts s into the store when it is a flag set, and takes the
// config's set out when s is not one (any more).
func (o *agentOFREP) apply(a *agent, s client.Snapshot) {
	if o == nil {
		return
	}
	switch _, err := o.store.Apply(string(s.Config.Base()), s.Version, s.Content, s.Deleted); {
	case errors.Is(err, ofrep.ErrNotFlagSet):
		o.log.Warn("OFREP: no longer a flag set; its flags are no longer served", "instance", a.opts.Instance, "config", s.Config, "version", s.Version, "err", err)
	case err != nil:
		// The client verified the version, but this build cannot evaluate
		// it: OFREP goes on serving the version before.
		fmt.Fprintf(a.env.IO.ErrOut, "agent %s: OFREP keeps the version before: %v\n", a.opts.Instance, err)
	}
}

// stop closes the listener, waits for the requests in flight and removes
// the socket.
func (o *agentOFREP) stop() {
	if o == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o.srv.Shutdown(ctx)
	if o.sock != "" {
		os.Remove(o.sock)
	}
}

// tokensHint is the hint for an error reading an OFREP tokens file: the
// chmod for one open to other users, else format, what its lines must be.
func tokensHint(err error, format string) string {
	if errors.Is(err, ofrep.ErrTokensFileMode) {
		return "make it readable by its owner alone (chmod 600), or its group too (chmod 640)"
	}
	return format
}
