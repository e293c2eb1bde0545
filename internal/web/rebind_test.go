package web_test

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/webtest"
)

// getAs GETs path from f's operations server with Host header host, as a
// browser does for a page whose name resolves to the server's address.
func getAs(t *testing.T, f *fixture, host, path string) (int, string) {
	t.Helper()
	code, b := webtest.Do(t, webtest.Request{Method: http.MethodGet, URL: f.base + path, Host: host})
	return code, string(b)
}

// TestServeRebinding stands where a DNS-rebinding attacker stands: a page
// of rebind.attacker.test, its name re-resolved to 127.0.0.1, asking a
// loopback serve --http for the overview and a version's full content.
// It gets 421 and nothing of either; the names the server is known by
// (loopback, localhost, and --http-host's) get 200.
func TestServeRebinding(t *testing.T) {
	t.Parallel()
	f := start(t, fixtureOptions{httpHosts: []string{"cuecast.example"}})
	_, port, err := net.SplitHostPort(f.p.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	version := "/api/versions/payments/checkout?version=1"
	poll.Until(t, "version 1 of payments/checkout", poll.Patience, func() (bool, string) {
		code, body := getAs(t, f, "127.0.0.1:"+port, version)
		return code == 200, body
	})
	for _, path := range []string{"/api/overview", version, "/metrics", "/"} {
		code, body := getAs(t, f, "rebind.attacker.test:"+port, path)
		if code != http.StatusMisdirectedRequest || strings.Contains(body, "checkout") || !strings.Contains(body, "--http-host") {
			t.Errorf("GET %s as rebind.attacker.test: %d %.300q; want 421 naming --http-host, without content", path, code, body)
		}
		for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "cuecast.example", "cuecast.example:8443"} {
			if code, body := getAs(t, f, host, path); code != 200 {
				t.Errorf("GET %s as %s: %d %.300q; want 200", path, host, code, body)
			}
		}
	}
	// The health endpoints say nothing a page could use, and a probe's Host
	// is whatever address it dialled (Kubernetes: the pod's): any Host.
	for _, path := range []string{"/healthz", "/readyz"} {
		for _, host := range []string{"rebind.attacker.test:" + port, "10.244.1.7:" + port} {
			if code, body := getAs(t, f, host, path); code != 200 {
				t.Errorf("GET %s as %s: %d %.300q; want 200", path, host, code, body)
			}
		}
	}
}
