package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/flags/ofrep"
)

// validateOFREP checks --ofrep and --ofrep-tokens: the agent serves OFREP
// on loopback or a Unix socket only, so that flags leave the host only
// through the hub's own endpoint.
func (o *AgentOptions) validateOFREP() error {
	if o.OFREP == "" {
		if o.OFREPTokens != "" {
			return usageErrorf("add --ofrep ADDR", "--ofrep-tokens needs --ofrep")
		}
		return nil
	}
	if path, ok := strings.CutPrefix(o.OFREP, "unix:"); ok {
		if path == "" {
			return usageErrorf("write it as unix:/run/cuecast/ofrep.sock", "--ofrep %q: no socket path", o.OFREP)
		}
		return nil
	}
	host, _, err := net.SplitHostPort(o.OFREP)
	if err != nil {
		return usageErrorf("write it as 127.0.0.1:PORT or unix:PATH", "--ofrep %q: %v", o.OFREP, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usageErrorf("serve OFREP on 127.0.0.1, [::1] or a Unix socket; other hosts use `cuecast serve --http`'s",
			"--ofrep %q is not a loopback address", o.OFREP)
	}
	return nil
}

// agentOFREP serves the agent's flag sets over OFREP (docs/FLAGS.md,
// "Other languages"): each version the agent writes that is a flag set is
// compiled into the store as it is written.
type agentOFREP struct {
	store *ofrep.Store
	srv   *http.Server
	ln    net.Listener
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
			return nil, &UsageError{Err: err, Hint: "one NAMESPACE TOKEN per line"}
		}
	}
	store := ofrep.NewStore()
	h, err := ofrep.New(ofrep.Options{Store: store, Tokens: tokens})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	network, addr := "tcp", a.opts.OFREP
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, addr = "unix", path
		// A socket left by an agent that did not stop cleanly.
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("agent: --ofrep %s: %w", a.opts.OFREP, err)
		}
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("agent: --ofrep %s: %w", a.opts.OFREP, err)
	}
	o := &agentOFREP{store: store, ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go o.srv.Serve(ln)
	where := "http://" + ln.Addr().String()
	if network == "unix" {
		where = "unix:" + addr
	}
	fmt.Fprintf(a.env.IO.ErrOut, "agent %s: OFREP at %s/ofrep/v1/ (%s)\n", a.opts.Instance, where, authWord(tokens != nil))
	return o, nil
}

func authWord(tokens bool) string {
	if tokens {
		return "tokens required"
	}
	return "no tokens: anyone on this host reads every flag set"
}

// apply puts s into the store when it is a flag set.
func (o *agentOFREP) apply(a *agent, s client.Snapshot) {
	if o == nil {
		return
	}
	if _, err := o.store.Apply(string(s.Config.Base()), s.Version, s.Content, s.Deleted); err != nil {
		// The client verified the version, but this build cannot evaluate
		// it: OFREP goes on serving the version before.
		fmt.Fprintf(a.env.IO.ErrOut, "agent %s: OFREP keeps the version before: %v\n", a.opts.Instance, err)
	}
}

// stop closes the listener and waits for the requests in flight.
func (o *agentOFREP) stop() {
	if o == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o.srv.Shutdown(ctx)
}
