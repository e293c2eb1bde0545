package cli_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"

	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/promtest"
)

// docBlock is the body of the fenced block under docs/name's
// `<!-- file: NAME -->` caption file; it fails t when there is none.
func docBlock(t *testing.T, name, file string) string {
	t.Helper()
	lines := strings.Split(readDoc(t, name), "\n")
	for i, l := range lines {
		if l != "<!-- file: "+file+" -->" {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			t.Fatalf("docs/%s: the caption %q is not followed by a fenced block", name, l)
		}
		var body []string
		for _, b := range lines[i+2:] {
			if b == "```" {
				return strings.Join(body, "\n") + "\n"
			}
			body = append(body, b)
		}
		t.Fatalf("docs/%s: the block of %s is not closed", name, file)
	}
	t.Fatalf("docs/%s has no block captioned <!-- file: %s -->; update TestRolloutDocJoin", name, file)
	return ""
}

// replaceDoc replaces old, which the document must say, by new.
func replaceDoc(t *testing.T, what, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("docs/ROLLOUT.md's %s no longer says %q; update TestRolloutDocJoin:\n%s", what, old, s)
	}
	return strings.ReplaceAll(s, old, new)
}

// TestRolloutDocJoin runs docs/ROLLOUT.md's "Joining the service's series
// to its version" as written: its prometheus.yml (the static form, the
// doc's addresses replaced by a real `cuecast agent --metrics` and a small
// service exporting http_requests_total and http_errors_total on another
// port) in a real Prometheus, and its query, which must return the
// service's error rate joined to the version the agent says it runs. The
// doc used to say to scrape the agent "as part of the service's target";
// a target is one address, so the two ports got different instance labels
// and the doc's query returned nothing: a stage judged by it waited on "no
// data" for good. The Kubernetes form runs the same way, the targets pod
// discovery would find given as static ones with its meta labels.
func TestRolloutDocJoin(t *testing.T) {
	t.Parallel()
	_, p := serveExample(t)
	_, stderr := startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "checkout-7f9c",
		"--trusted-key", p.PublicKey, "--metrics", "127.0.0.1:0", "--config", "payments/checkout", "--dir", t.TempDir())
	info := regexp.MustCompile(`cuecast_config_info\{[^}]*config="payments/checkout"[^}]*version="(\d+)"\} 1`)
	var version string
	poll.Until(t, "the agent's cuecast_config_info of payments/checkout", poll.Patience, func() (bool, string) {
		if !strings.Contains(stderr.String(), "serving metrics on ") {
			return false, "agent stderr " + stderr.String()
		}
		out := agentMetrics(t, stderr.String())
		m := info.FindStringSubmatch(out)
		if m == nil {
			return false, out
		}
		version = m[1]
		return true, ""
	})
	_, rest, _ := strings.Cut(stderr.String(), "serving metrics on http://")
	agentAddr, _, _ := strings.Cut(rest, "/metrics")

	// The service: 100 requests and 2 errors per scrape, an error rate of
	// exactly 2 %.
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounter(prometheus.CounterOpts{Name: "http_requests_total", Help: "Requests handled."})
	errs := prometheus.NewCounter(prometheus.CounterOpts{Name: "http_errors_total", Help: "Requests failed."})
	reg.MustRegister(requests, errs)
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(100)
		errs.Add(2)
		metrics.ServeHTTP(w, r)
	}))
	t.Cleanup(svc.Close)

	svcAddr := strings.TrimPrefix(svc.URL, "http://")
	query := docBlock(t, "ROLLOUT.md", "error-rate.promql")
	query = replaceDoc(t, "query", query, `version="8"`, fmt.Sprintf("version=%q", version))

	// The agent listens where Prometheus scrapes it: the doc's agent line
	// and its prometheus.yml name one address (they once named 127.0.0.1
	// and 10.0.0.7, and a Prometheus on another host reached nothing).
	replaceDoc(t, "agent line", readDoc(t, "ROLLOUT.md"), "`cuecast agent --metrics 10.0.0.7:9464`", "")
	static := docBlock(t, "ROLLOUT.md", "prometheus.yml")
	static = replaceDoc(t, "prometheus.yml", static, "10.0.0.7:8080", svcAddr)
	static = replaceDoc(t, "prometheus.yml", static, "10.0.0.7:9464", agentAddr)
	// Kubernetes pod discovery, which needs a cluster (and which Debian's
	// prometheus is built without), stood in for by the targets it would
	// find for the pod, with its meta labels: each container port of the
	// pod, to every job, for the doc's relabel rules to pick from.
	pod := fmt.Sprintf(`    static_configs:
      - targets: [%q]
        labels: {__meta_kubernetes_namespace: payments, __meta_kubernetes_pod_name: checkout-7f9c, __meta_kubernetes_pod_label_app: checkout, __meta_kubernetes_pod_container_port_name: http}
      - targets: [%q]
        labels: {__meta_kubernetes_namespace: payments, __meta_kubernetes_pod_name: checkout-7f9c, __meta_kubernetes_pod_label_app: checkout, __meta_kubernetes_pod_container_port_name: cuecast-metrics}
`, svcAddr, agentAddr)
	k8s := docBlock(t, "ROLLOUT.md", "prometheus-kubernetes.yml")
	k8s = replaceDoc(t, "prometheus-kubernetes.yml", k8s, "    kubernetes_sd_configs:\n      - role: pod\n", pod)

	for name, conf := range map[string]string{"prometheus.yml": static, "prometheus-kubernetes.yml": k8s} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if strings.Contains(conf, "global:") {
				t.Fatalf("docs/ROLLOUT.md's %s sets global:, which this test sets (a fast scrape): update TestRolloutDocJoin", name)
			}
			prom := promtest.StartConfig(t, "global:\n  scrape_interval: 200ms\n  scrape_timeout: 200ms\n"+conf)
			poll.Until(t, "the doc's query returning the service's error rate joined to v"+version, poll.Patience, func() (bool, string) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				res, _, _, err := prom.API.Query(ctx, query, time.Now())
				if err != nil {
					return false, err.Error()
				}
				v, ok := res.(model.Vector)
				if !ok || len(v) != 1 || math.Abs(float64(v[0].Value)-0.02) > 1e-9 {
					return false, fmt.Sprintf("%s, want one value 0.02", res)
				}
				return true, ""
			})
		})
	}
}
