package cli

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/httpsrv"
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
	_, port, _ := net.SplitHostPort(addr)
	for _, c := range []struct {
		host string
		code int
	}{
		{"rebind.attacker.example:" + port, http.StatusMisdirectedRequest},
		{"rebind.attacker.example", http.StatusMisdirectedRequest},
		{"localhost.attacker.example:" + port, http.StatusMisdirectedRequest},
		{"192.168.1.10:" + port, http.StatusMisdirectedRequest},
		{"127.0.0.1:" + port, http.StatusOK},
		{"localhost:" + port, http.StatusOK},
		{"[::1]:" + port, http.StatusOK},
		{"metrics.node.internal:" + port, http.StatusOK},
	} {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = c.host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.code {
			t.Errorf("Host %s: %d %s, want %d", c.host, res.StatusCode, b, c.code)
		}
		if leaked := strings.Contains(string(b), "payments/checkout"); leaked != (c.code == http.StatusOK) {
			t.Errorf("Host %s: %s; want the series only in a 200", c.host, b)
		}
	}
}
