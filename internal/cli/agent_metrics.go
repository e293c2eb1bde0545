package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/client/prominfo"
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
// picks one).
func serveAgentMetrics(ctx context.Context, env *Env, addr string, cl *client.Client) error {
	if addr == "" {
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prominfo.New(cl))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return &UsageError{Err: fmt.Errorf("agent: --metrics: %w", err), Hint: "pass a free address, like --metrics 127.0.0.1:9464"}
	}
	srv := httpsrv.New(mux, httpsrv.Limits{}, env.Logger())
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
