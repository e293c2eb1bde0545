package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/client/prominfo"
	"github.com/cuecast/cuecast/internal/hostcheck"
	"github.com/cuecast/cuecast/internal/httpsrv"
)

// serveAgentMetrics serves /metrics on addr until ctx ends, with the
// cuecast_config_info series of cl (client/prominfo): what a Go service
// exports from its own registry, for a service that is not written in Go.
// Prometheus gives its port an instance label of its own (a target is one
// address), so its series join the service's only when the scrape config
// gives both targets the same instance label, in jobs of their own
// (docs/ROLLOUT.md's prometheus.yml, TestRolloutDocJoin); an exported
// label cannot do it, since the scrape owns instance. Nothing is served when
// addr is empty; the address listened on is said on stderr (a port 0
// picks one). names are --metrics-host's (metricsServer).
func serveAgentMetrics(ctx context.Context, env *Env, addr string, names []string, cl *client.Client) error {
	if addr == "" {
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prominfo.New(cl))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return &UsageError{Err: fmt.Errorf("agent: --metrics: %w", err), Hint: "pass a free address, like --metrics 127.0.0.1:9464"}
	}
	srv, err := metricsServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), addr, names, httpsrv.Limits{}, env.Logger())
	if err != nil {
		l.Close()
		return &UsageError{Err: fmt.Errorf("agent: --metrics-host: %w", err), Hint: "give the name Prometheus scrapes as Host, like --metrics-host node1.internal"}
	}
	fmt.Fprintf(env.IO.ErrOut, "agent: serving metrics on http://%s/metrics\n", l.Addr())
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			env.Logger().Error("agent metrics server", "err", err)
		}
	}()
	context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	return nil
}

// metricsServer serves h as GET /metrics, bound as every cuecast listener is
// (httpsrv), to the requests whose Host hostcheck.ForBind(addr, names)
// allows, as serve's --http and --http-host do: on a loopback addr only
// loopback names, localhost and names. The series name every config the
// agent keeps, its version and checksum, and a web page whose name an
// attacker rebinds to 127.0.0.1 reaches the port from a browser on the
// host with its own name as Host.
func metricsServer(h http.Handler, addr string, names []string, lim httpsrv.Limits, log *slog.Logger) (*httpsrv.Server, error) {
	hosts, err := hostcheck.ForBind(addr, names)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	refuse := func(w http.ResponseWriter, r *http.Request, msg string) {
		http.Error(w, msg+"; if that is its name, add it with agent --metrics-host NAME", http.StatusMisdirectedRequest)
	}
	return httpsrv.New(hostcheck.Guard(mux, hosts, refuse), lim, log), nil
}
