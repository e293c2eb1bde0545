package cli

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/httpsrv"
	"github.com/cuecast/cuecast/internal/webtest"
)

// TestAgentMetricsRebinding: a web page on the host, its name rebound to
// 127.0.0.1, reaches the agent's loopback --metrics from the browser with
// its own name as Host; the agent answers only requests addressed to a
// loopback address, localhost or a --metrics-host name, so the page reads
// no config's name, version or checksum.
func TestAgentMetricsRebinding(t *testing.T) {
	const series = `cuecast_config_info{config="payments/checkout",version="7"} 1`
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, series+"\n") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv, err := metricsServer(metrics, addr, []string{"metrics.node.internal"}, httpsrv.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	hosts := rebindHosts(t, addr)
	_, port, _ := net.SplitHostPort(addr)
	hosts["metrics.node.internal:"+port] = true
	for host, allowed := range hosts {
		code, body := webtest.Do(t, webtest.Request{Method: http.MethodGet, URL: "http://" + addr + "/metrics", Host: host})
		b := string(body)
		if code != http.StatusOK && code != http.StatusMisdirectedRequest || (code == http.StatusOK) != allowed {
			t.Errorf("Host %s: %d %s, want answered %v (else 421)", host, code, b, allowed)
		}
		if strings.Contains(b, "payments/checkout") != allowed {
			t.Errorf("Host %s: %s; want the series only when answered", host, b)
		}
	}
}
